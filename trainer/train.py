"""One training round: a checkpoint's batches in, a gated candidate checkpoint out.

1. Read the examples of the batches offered for the served checkpoint (its own rollouts and the
   rewards they earned: on-policy data).
2. Hold out a fixed share of interactions (chosen by a hash of the id, so a rerun holds out the
   same ones) and update a copy of the checkpoint on the rest (``learner``).
3. Estimate the candidate's reward on the held-out interactions from the served checkpoint's own
   rollouts (``offpolicy``: no new traffic needed), and read the monitors' alarms of the served
   checkpoint against its parent (reward hacking shows there before it shows in the reward).
4. The gate decides; the candidate is registered either way (promoted or rejected, with the
   reasons and figures), so every decision can be traced to its weights and data.

Publishing the decision on the ``checkpoints`` topic is the caller's step, after this returns.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rewards.monitors import Alarm
from trainer.examples import Example, read_examples
from trainer.gate import GateConfig, GateDecision, decide
from trainer.learner import LearnerConfig, UpdateStats, update
from trainer.offpolicy import Estimate, estimate
from trainer.registry import PROMOTED, REJECTED, CheckpointInfo, CheckpointRegistry


@dataclass(frozen=True)
class TrainResult:
    candidate: CheckpointInfo
    decision: GateDecision
    stats: UpdateStats
    estimate: Estimate
    n_train: int
    n_held_out: int
    skipped: dict[str, int]


def held_out(interaction_id: str, fraction: float) -> bool:
    """Whether an interaction is held out for the eval: a fixed, uniform choice by its id.

    >>> held_out("i-1", 0.0), held_out("i-1", 1.0)
    (False, True)
    """
    digest = hashlib.blake2b(interaction_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < fraction * 2**64


def split(examples: Sequence[Example], fraction: float) -> tuple[list[Example], list[Example]]:
    train: list[Example] = []
    held: list[Example] = []
    for example in examples:
        (held if held_out(example.rollout.interaction_id, fraction) else train).append(example)
    return train, held


def train_round(registry: CheckpointRegistry, parent_id: str,
                batches: Sequence[tuple[str, Sequence[str | Path]]], candidate_id: str, *,
                learner: LearnerConfig, gate: GateConfig, alarms: Sequence[Alarm],
                held_out_fraction: float = 0.3) -> TrainResult:  # fmt: skip
    """Train ``candidate_id`` from ``parent_id`` on ``batches`` (``(batch_id, data files)``)."""
    if not 0 < held_out_fraction < 1:
        raise ValueError("held_out_fraction must be between 0 and 1")
    examples: list[Example] = []
    skipped: Counter[str] = Counter()
    for batch, paths in batches:
        for path in paths:
            read = read_examples(path)
            if read.checkpoint_id != parent_id:
                raise ValueError(f"batch {batch} holds {read.checkpoint_id}'s interactions, not "
                                 f"{parent_id}'s: on-policy training reads its own checkpoint's")
            examples += read.examples
            skipped.update(read.skipped)
    if not examples:
        raise ValueError(f"no examples with a rollout of {parent_id} in {len(batches)} batch(es)")
    train, held = split(examples, held_out_fraction)
    parent = registry.load(parent_id)
    candidate, stats = update(parent, train, learner)
    figures = estimate(candidate, held)
    decision = decide(figures, alarms, gate)
    evals = {"offpolicy": asdict(figures), "gate": decision.figures, "update": asdict(stats),
             "n_train": len(train), "n_held_out": len(held), "skipped": dict(skipped),
             "alarms": [a.message for a in alarms]}
    info = registry.register(candidate, checkpoint_id=candidate_id, parent=parent_id,
                             evals=evals, batches=tuple(b for b, _ in batches),
                             status=PROMOTED if decision.passed else REJECTED,
                             reasons=decision.reasons)
    return TrainResult(info, decision, stats, figures, len(train), len(held), dict(skipped))
