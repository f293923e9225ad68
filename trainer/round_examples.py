"""Which of a round's examples the learner trains on, and which the gate judges the candidate
on: whole users to one side (a fixed hash of the user id, so a rerun holds out the same users),
and whole trajectories within the learner's context or left out and counted."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from models.examples import Example, trajectories
from release.offpolicy_bound import user_key


def held_out(unit: str, fraction: float) -> bool:
    """Whether a user (``user_key``) is held out for the eval: a fixed, uniform choice by its id.

    >>> held_out("user:u1", 0.0), held_out("user:u1", 1.0)
    (False, True)
    """
    digest = hashlib.blake2b(unit.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < fraction * 2**64


def unit_of(example: Example) -> str:
    return user_key(example.user_id, example.session_id, example.rollout.interaction_id)


def split(examples: Sequence[Example], fraction: float) -> tuple[list[Example], list[Example]]:
    """Training and held-out examples, whole users to one side or the other.

    A row without a user id has no user to keep whole: keyed by its session, one anonymous
    person's other sessions could fall on the training side and make the candidate look
    better on the held-out one. So where some rows name their user, the rows that do not are
    trained on and never held out (the gate's evidence is then about identified users only);
    only where no row names one (a deployment without user ids) are sessions the unit.

    >>> from types import SimpleNamespace as NS
    >>> rows = [NS(user_id=None, session_id=f"s{k}", rollout=NS(interaction_id=f"i{k}"))
    ...         for k in range(40)] + [NS(user_id=f"u{k}", session_id=None,
    ...                                   rollout=NS(interaction_id=f"j{k}")) for k in range(40)]
    >>> train, held = split(rows, 0.3)
    >>> all(e.user_id for e in held), len(train) + len(held)
    (True, 80)
    >>> any(e.user_id is None for e in split(rows[:40], 0.3)[1])  # no ids at all: sessions
    True
    """
    identified = any(e.user_id for e in examples)
    train: list[Example] = []
    held: list[Example] = []
    for example in examples:
        if identified and not example.user_id:
            train.append(example)
        else:
            (held if held_out(unit_of(example), fraction) else train).append(example)
    return train, held


def within_context(examples: Sequence[Example], limit: int | None) -> tuple[list[Example], int]:
    """The examples of every trajectory whose calls all fit ``limit`` positions (prompt and
    completion), and how many calls were left out.

    The stated rule for sequences longer than the learner's context: the whole trajectory is
    left out and counted (``over_context``), never truncated. Truncating would train on a
    prompt the model never saw, and keeping the other calls of the run would credit them with a
    reward the left-out call earned too (and the gate's trajectory weight would lack a factor).
    The gateway refuses a prompt longer than its engine's context (400
    ``context_length_exceeded``), so this only happens when the learner's context is shorter.

    >>> from types import SimpleNamespace as NS
    >>> def call(run, n):
    ...     return NS(rollout=NS(interaction_id=run, turn=True, prompt_ids=[0] * n,
    ...                          completion_ids=[1]))
    >>> kept, left = within_context([call("a", 3), call("a", 9), call("b", 3)], 8)
    >>> [e.rollout.interaction_id for e in kept], left
    (['b'], 2)
    """
    if limit is None:
        return list(examples), 0

    def fits(e: Example) -> bool:
        return len(e.rollout.prompt_ids) + len(e.rollout.completion_ids) <= limit

    keep = {i for run in trajectories(examples) if all(fits(examples[i]) for i in run)
            for i in run}  # fmt: skip
    kept = [e for i, e in enumerate(examples) if i in keep]
    return kept, len(examples) - len(kept)
