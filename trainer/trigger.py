"""When a round may start: the served checkpoint's unseen batches must hold enough to train on
and to meet the gate's minimum held-out evidence, or the round could only be rejected for it.

Why: a round trained on whatever arrived (one example, 45 held-out runs where the gate needs 50)
and spent minutes of training and candidate evals, and a gate attempt, on a candidate that could
not pass. Counted here before any update, conservatively: a held-out run counts when it has a
reward (the gate also counts censored runs, so it sees at least as many), a user when one of
its held-out runs does. A round that waits registers nothing and spends no attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

from release.gate import GateConfig
from trainer.round_examples import RoundExamples, unit_of


@dataclass(frozen=True)
class Evidence:
    """What a round's batches hold for the gate: held-out runs with a reward, their users."""

    runs: int
    users: int
    trainable: bool  # any run to train on


def evidence_of(data: RoundExamples) -> Evidence:
    scored = [e for e in data.held if e.reward is not None]
    runs = {(e.org_id, e.rollout.interaction_id) for e in scored}
    return Evidence(len(runs), len({unit_of(e) for e in scored}), bool(data.train))


def waiting_for(data: RoundExamples, gate: GateConfig) -> str | None:
    """What the round still lacks, in a sentence; None when it may start.

    >>> from types import SimpleNamespace as NS
    >>> held = [NS(reward=1.0, user_id=f"u{k % 4}", session_id=None, org_id="o",
    ...            rollout=NS(interaction_id=f"i{k}")) for k in range(12)]
    >>> waiting_for(NS(held=held, train=held), GateConfig(min_examples=20, min_users=10))
    '12 held-out runs with a reward of the 20 the gate needs, 4 held-out users of 10'
    >>> waiting_for(NS(held=held, train=held), GateConfig(min_examples=10, min_users=4)) is None
    True
    """
    have = evidence_of(data)
    short = []
    if have.runs < gate.min_examples:
        short.append(f"{have.runs} held-out runs with a reward of the {gate.min_examples} the "
                     f"gate needs")  # fmt: skip
    if have.users < gate.min_users:
        short.append(f"{have.users} held-out users of {gate.min_users}")
    if not have.trainable:
        short.append("no run to train on")
    return ", ".join(short) or None
