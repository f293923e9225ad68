"""A round's examples: read from its batches' data files (:func:`read_round`), and which of
them the learner trains on and which the gate judges the candidate on: whole users to one side
(a fixed hash of the user id, so a rerun holds out the same users), and whole trajectories
within the learner's context or left out and counted."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoints.record import CheckpointInfo
from models.examples import Example, read_examples, trajectories
from release.offpolicy_bound import user_key
from trainer.mismatch import BatchMismatch

if TYPE_CHECKING:  # types only: the round's reading loads no torch of its own
    import torch

log = logging.getLogger(__name__)


def held_out(unit: str, fraction: float) -> bool:
    """Whether a user (``user_key``) is held out for the eval: a fixed, uniform choice by its id.

    >>> held_out("user:u1", 0.0), held_out("user:u1", 1.0)
    (False, True)
    """
    digest = hashlib.blake2b(unit.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < fraction * 2**64


def unit_of(example: Example) -> str:
    return user_key(
        example.user_id, example.session_id, example.rollout.interaction_id, example.org_id
    )


def split(examples: Sequence[Example], fraction: float) -> tuple[list[Example], list[Example]]:
    """Training and held-out examples, whole users to one side or the other.

    A row without a user id has no user to keep whole: keyed by its session, one anonymous
    person's other sessions could fall on the training side and make the candidate look
    better on the held-out one. So where some rows name their user, the rows that do not are
    trained on and never held out (the gate's evidence is then about identified users only);
    only where no row names one (a deployment without user ids) are sessions the unit.

    >>> from types import SimpleNamespace as NS
    >>> rows = [NS(user_id=None, session_id=f"s{k}", org_id="o",
    ...            rollout=NS(interaction_id=f"i{k}")) for k in range(40)] + [
    ...         NS(user_id=f"u{k}", session_id=None, org_id="o",
    ...            rollout=NS(interaction_id=f"j{k}")) for k in range(40)]
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
    ...                          completion_ids=[1]), org_id="o")
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


@dataclass
class RoundExamples:
    """A round's examples as read from its batches, and the two sides they fall on.

    ``examples`` is every row read (the mismatch check samples each batch's from all of them),
    ``train`` the rewarded examples the learner trains on and ``held`` the held-out users'
    interactions (censored ones included: the gate's estimand keeps them); ``skipped`` counts
    the rows left out, by reason, ``batch_of`` names each interaction's batch, and ``mismatch``
    and ``quarantined`` are the batches' mismatch checks and the batches they left out.
    """

    examples: list[Example]
    train: list[Example]
    held: list[Example]
    skipped: Counter[str]
    batch_of: dict[tuple[str | None, str], str]  # (org_id, interaction id) -> its batch
    mismatch: dict[str, BatchMismatch] = field(default_factory=dict)  # by batch, when checked
    quarantined: dict[str, str] = field(default_factory=dict)  # batch -> why
    # held-out interactions earlier checkpoints of the line served (read_earlier), and the rows
    # of those batches left out, by reason
    earlier: list[Example] = field(default_factory=list)
    earlier_skipped: Counter[str] = field(default_factory=Counter)
    earlier_scores: list[torch.Tensor] = field(
        default_factory=list
    )  # by the parent, before its update

    def by_batch(self) -> dict[str, list[Example]]:
        """Every example read, by the batch it came in."""
        out: dict[str, list[Example]] = {}
        for example in self.examples:
            out.setdefault(self.batch_of[_run_key(example)], []).append(example)
        return out

    def fit_context(self, limit: int | None) -> None:
        """Leave out, and count, every trajectory longer than the learner's ``limit`` positions
        (:func:`within_context`); ValueError when too few examples are left."""
        (self.train, over_train), (self.held, over_held) = (
            within_context(self.train, limit),
            within_context(self.held, limit),
        )
        self.earlier, over_earlier = within_context(self.earlier, limit)
        self.earlier_skipped["over_context"] += over_earlier
        if over_train or over_held:
            self.skipped["over_context"] += over_train + over_held
            log.warning("%d calls longer than the model's %s positions left out with their runs",
                        over_train + over_held, limit)  # fmt: skip
            if not self.train or not self.held:
                raise ValueError(f"too few examples within the model's context ({limit} positions)")

    def quarantine(self, checks: dict[str, BatchMismatch]) -> bool:
        """Keep the batches' mismatch checks and leave out the examples of every batch whose
        check failed (``quarantined``, with the reason); whether both sides still have some."""
        self.mismatch = dict(checks)
        self.quarantined = {b: c.reason for b, c in checks.items() if c.reason is not None}
        for batch, reason in self.quarantined.items():
            log.warning("batch %s quarantined: %s", batch, reason)
        if not self.quarantined:
            return True

        def kept(e: Example) -> bool:
            return self.batch_of[_run_key(e)] not in self.quarantined

        self.train = [e for e in self.train if kept(e)]
        self.held = [e for e in self.held if kept(e)]
        return bool(self.train) and bool(self.held)


def _run_key(example: Example) -> tuple[str | None, str]:
    """An interaction as its organisation names it: two organisations' same id are two."""
    return example.org_id, example.rollout.interaction_id


def training_window(batch_ids: Sequence[str], window: int,
                    attempts: Sequence[Sequence[str]] = ()) -> list[str]:  # fmt: skip
    """The batches a round trains on: those no earlier attempt on the parent trained on, and
    those that were new to each of the last ``window - 1`` attempts (all when 0, or when
    ``attempts``, the batches each earlier attempt trained on, oldest first, are none).

    A rejected candidate's batches stay its parent's (still on-policy), so the next attempt
    could train on every one of them again, and each retry would take longer than the last.
    It trains on the new data instead, and the last attempt's new data beside it where the
    window is 2, so that a thin round is not trained on alone. Counted in attempts, not in
    batches: a batch builder that builds every few seconds (``batches build --watch``) makes a
    round of many small batches, and the newest two of them were a sliver of the round. The
    gate still judges on the held-out users of every batch: that evidence only grows, and each
    attempt pays for its look (``release.gate.attempt_level``).

    >>> training_window(["b1", "b2", "b3"], 2)  # a first attempt: everything
    ['b1', 'b2', 'b3']
    >>> training_window(["b1", "b2", "b3", "b4"], 2, [["b1"], ["b1", "b2"]])
    ['b2', 'b3', 'b4']
    >>> training_window(["b1", "b2", "b3", "b4"], 1, [["b1", "b2"]]), training_window(["b1"], 0)
    (['b3', 'b4'], ['b1'])
    """
    if window < 0:
        raise ValueError("a training window is 0 (every batch) or a number of attempts")
    if not window or not attempts:
        return list(batch_ids)
    new_at = [set(fresh(tried, attempts[:k])) for k, tried in enumerate(attempts)]
    keep = set().union(*new_at[len(new_at) - (window - 1) :]) if window > 1 else set()
    keep |= set(fresh(batch_ids, attempts))
    return [b for b in batch_ids if b in keep]


def fresh(batch_ids: Sequence[str], attempts: Sequence[Sequence[str]]) -> list[str]:
    """The batches no earlier attempt trained on.

    >>> fresh(["b1", "b2", "b3"], [["b1"], ["b1", "b2"]])
    ['b3']
    """
    tried = {b for batches in attempts for b in batches}
    return [b for b in batch_ids if b not in tried]


def _not_the_lines(example: Example, parent: CheckpointInfo, org_id: str | None,
                   own_only: Sequence[str]) -> str | None:  # fmt: skip
    """Why ``example`` is not for ``org_id``'s line (None: the shared line, which leaves out
    ``own_only``'s organisations) trained from ``parent``, or None when it is."""
    if example.rollout.model.tokenizer_sha256 != parent.model.tokenizer_sha256:
        return "other_tokenizer"
    if org_id is not None and example.org_id != org_id:
        return "other_organisation"
    if org_id is None and example.org_id in own_only:
        return "own_only_organisation"
    return None


class TooFewExamples(ValueError):
    """The batches hold examples, but not enough to both train and hold out: more must come."""


def read_round(parent: CheckpointInfo, batches: Sequence[tuple[str, Sequence[str | Path]]],
               held_out_fraction: float, org_id: str | None = None,
               own_only: Sequence[str] = (), train_window: int = 0,
               attempts: Sequence[Sequence[str]] = ()) -> RoundExamples:  # fmt: skip
    """The examples of ``batches`` (``(batch_id, data files)``, oldest first), all of them
    ``parent``'s rollouts with its tokenizer (others are counted in ``skipped``), split into
    training and held-out ones (:func:`split`). ``org_id``: an organisation's line reads only
    that organisation's examples; the shared line (None) reads every organisation's but those of
    ``own_only``. ``train_window`` and ``attempts`` (the batches each earlier attempt on the
    parent trained on): which batches are trained on, while every batch's held-out users are
    the gate's evidence (:func:`training_window`).
    ValueError: a batch of another checkpoint, no rewarded example, or too few to both train
    and hold out."""
    examples: list[Example] = []
    skipped: Counter[str] = Counter()
    batch_of: dict[tuple[str | None, str], str] = {}  # an interaction -> the batch it came in
    for batch, paths in batches:
        for path in paths:
            read = read_examples(path)
            if read.checkpoint_id != parent.checkpoint_id:
                raise ValueError(
                    f"batch {batch} holds {read.checkpoint_id}'s interactions, not "
                    f"{parent.checkpoint_id}'s: on-policy training reads its own checkpoint's"
                )
            for example in (*read.examples, *read.censored):
                reason = _not_the_lines(example, parent, org_id, own_only)
                if reason is not None:
                    skipped[reason] += 1
                else:
                    examples.append(example)
                    batch_of[_run_key(example)] = batch
            skipped.update(read.skipped)
    if not any(e.reward is not None for e in examples):
        raise ValueError(
            f"no examples with a rollout of {parent.checkpoint_id} in {len(batches)} batch(es)"
            f" (rows left out, by reason: {dict(skipped) or 'none'})"
        )
    # censored calls (no reward) are held out with their users, never trained on: the gate's
    # estimand keeps them (release.offpolicy_bound)
    train, held = split(examples, held_out_fraction)
    window = set(training_window([b for b, _ in batches], train_window, attempts))
    train = [e for e in train if e.reward is not None and batch_of[_run_key(e)] in window]
    if not train or not any(e.reward is not None for e in held):
        raise TooFewExamples(f"{len(examples)} examples: too few to both train and hold out")
    return RoundExamples(examples, train, held, skipped, batch_of)


def read_earlier(parent: CheckpointInfo, batches: Sequence[tuple[str, str, Sequence[str | Path]]],
                 held_out_fraction: float, org_id: str | None = None,
                 own_only: Sequence[str] = ()) -> tuple[list[Example], Counter[str]]:  # fmt: skip
    """The held-out users' interactions of ``batches`` (``(batch_id, checkpoint_id, data
    files)``) that earlier checkpoints of ``parent``'s line served: evidence for the gate with
    both arms off-policy (``release.offpolicy_bound``), never trained on. Only interactions of
    identified users held out by the one hash every line shares (no line trained on them), with
    ``parent``'s tokenizer, of ``org_id``'s users (the shared line: all but ``own_only``'s), and
    sampled with full support (the both-arms bound is the centred one); the others are counted
    by reason."""
    kept: list[Example] = []
    skipped: Counter[str] = Counter()
    for batch, checkpoint_id, paths in batches:
        for path in paths:
            read = read_examples(path)
            if read.checkpoint_id != checkpoint_id:
                raise ValueError(f"batch {batch} holds {read.checkpoint_id}'s interactions, "
                                 f"not {checkpoint_id}'s as announced")  # fmt: skip
            for example in (*read.examples, *read.censored):
                reason = _not_the_lines(example, parent, org_id, own_only)
                if reason is not None:
                    skipped[reason] += 1
                elif not example.user_id or not held_out(unit_of(example), held_out_fraction):
                    skipped["trained_side"] += 1
                else:
                    kept.append(example)
    whole: list[Example] = []  # a run is taken whole: its weight is the product of its calls'
    for run in trajectories(kept):
        if all(kept[i].rollout.sampling.top_p >= 1.0 for i in run):
            whole.extend(kept[i] for i in run)
        else:
            skipped["nucleus"] += len(run)
    return whole, skipped
