"""What a round leaves in the registry: its candidate, registered with the record of how it was
trained and judged, so that every decision can be traced to its weights and data and
recomputed (``rtrl gate evaluate --checkpoint ID``).

A candidate that passes the gate is registered promoted, or as a canary where the round has a
canary stage (``release.canary``: it serves a share of users first, and its live A/B decides);
one that fails is registered rejected, with the gate's reasons. A round whose batches were all
quarantined registers its candidate rejected and untrained, so that those batches are never
offered again.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from checkpoints.record import CANARY, PROMOTED, REJECTED, CheckpointInfo, TrainingRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import STATE_FILE, weight_writers
from models.loading import LoraSettings
from models.policy import CausalLMPolicy
from release.canary_config import canary_stage
from release.evidence import FILE as EVIDENCE_FILE
from trainer.learner import UpdateResult, UpdateStats
from trainer.round_examples import RoundExamples
from trainer.round_gate import GateOutcome
from trainer.round_options import RoundOptions


@dataclass(frozen=True)
class TrainedCandidate:
    """The candidate's weights as the update left them, to be registered."""

    policy: CausalLMPolicy  # updated in place
    adapter: LoraSettings | None  # its LoRA adapter; None: every weight was trained
    update: UpdateResult
    reference: CheckpointInfo | None  # the KL penalty's reference; None without a penalty


def round_record(outcome: GateOutcome, stats: UpdateStats, data: RoundExamples,
                 options: RoundOptions, accelerator: Accelerator,
                 seconds: dict[str, float]) -> dict[str, Any]:  # fmt: skip
    """The candidate's ``evals``: the gate's figures and settings, its evidence file's hash, the
    update's statistics and settings, the examples' counts, the batches' mismatch checks, the
    alarms and evals, where it ran and where its minutes went."""
    return {
        "offpolicy": asdict(outcome.estimate),
        "gate": {
            **outcome.decision.figures,
            "attempt": float(outcome.attempt),
            "seed": float(options.learner.seed),
        },
        "gate_config": asdict(options.gate),
        "evidence": {
            "file": EVIDENCE_FILE,
            "sha256": hashlib.sha256(outcome.evidence).hexdigest(),
            "rows": outcome.evidence_rows,
            "earlier_rows": outcome.earlier_rows,
        },
        "update": asdict(stats),
        "learner": asdict(options.learner),
        "n_train": len(data.train),
        "n_held_out": len(data.held),
        "n_held_out_censored": sum(e.reward is None for e in data.held),
        "skipped": dict(data.skipped),
        "n_earlier_held_out": len(data.earlier),
        "skipped_earlier": dict(data.earlier_skipped),
        "mismatch": {b: asdict(c) for b, c in data.mismatch.items()},
        "quarantined": data.quarantined,
        "alarms": outcome.alarms,
        "candidate_evals": [asdict(t) for t in outcome.tests],
        "tool_opening": outcome.opening.message if outcome.opening is not None else None,
        "tool_opening_check": outcome.opening.as_record() if outcome.opening is not None else None,
        "tool_opening_alarms": outcome.opening_alarms,
        "candidate_evals_by": outcome.evals_by,
        "device": str(accelerator.device),
        "processes": accelerator.num_processes,
        "seconds": {name: round(s, 1) for name, s in seconds.items()},
    }


def register_candidate(registry: CheckpointRegistry, parent: CheckpointInfo, candidate_id: str,
                       batch_ids: tuple[str, ...], candidate: TrainedCandidate,
                       outcome: GateOutcome, evals: dict[str, Any],
                       options: RoundOptions) -> CheckpointInfo:  # fmt: skip
    """Register the candidate under the gate's decision: promoted, a canary (with
    ``options.canary``'s stage in its record) or rejected; on ``options.org``'s line (None: the
    shared line)."""
    canary = options.canary
    passed = outcome.decision.passed
    if canary is not None and passed:
        evals = {**evals, "canary": canary_stage(candidate_id, canary)}
    update = candidate.update
    weights, files = weight_writers(candidate.policy, candidate.adapter, update.optimizer_state)
    files[EVIDENCE_FILE] = lambda path: _write(path, outcome.evidence)
    training = TrainingRef(
        step=parent.training.step + update.stats.grad_steps,
        state={},  # no running state: advantages are within a round's task groups
        file=STATE_FILE,
        sha256="0" * 64,
        **_reference_ref(candidate.reference),
    )
    return registry.register(
        checkpoint_id=candidate_id,
        parent=parent.checkpoint_id,
        model=parent.model,
        weights=weights,
        training=training,
        files=files,
        evals=evals,
        batches=batch_ids,
        status=(CANARY if canary else PROMOTED) if passed else REJECTED,
        reasons=outcome.decision.reasons,
        org_id=options.org,
    )


def register_quarantined(registry: CheckpointRegistry, parent: CheckpointInfo,
                         candidate_id: str, batch_ids: tuple[str, ...], policy: CausalLMPolicy,
                         adapter: LoraSettings | None, data: RoundExamples,
                         org_id: str | None = None) -> str:  # fmt: skip
    """Nothing is left to train on once the quarantined batches are out: the candidate is
    registered rejected with the parent's weights and the reasons, so that its batches are
    never offered again. Returns what the round's error says."""
    weights, files = weight_writers(policy, adapter, None)
    reasons = tuple(f"batch {b} quarantined: {r}" for b, r in data.quarantined.items())
    registry.register(
        checkpoint_id=candidate_id,
        parent=parent.checkpoint_id,
        model=parent.model,
        weights=weights,
        training=TrainingRef(step=parent.training.step, state=parent.training.state),
        files=files,
        evals={
            "mismatch": {b: asdict(c) for b, c in data.mismatch.items()},
            "quarantined": data.quarantined,
            "n_train": 0,
            "n_held_out": 0,
        },  # fmt: skip
        batches=batch_ids,
        status=REJECTED,
        reasons=(*reasons, "too few examples left to train and hold out"),
        org_id=org_id,
    )
    return f"{candidate_id} rejected untrained: " + "; ".join(reasons)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _reference_ref(info: CheckpointInfo | None) -> dict[str, str | None]:
    """The KL penalty's reference as the record names it: its id, and the sha256 of its weights
    (of the base model for a checkpoint that is the base itself); nothing without a penalty."""
    if info is None:
        return {}
    return {
        "reference_id": info.checkpoint_id,
        "reference_sha256": info.weights.sha256 or info.model.base_sha256,
    }
