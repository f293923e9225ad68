"""One training round: a checkpoint's batches in, a gated candidate checkpoint out.

1. Read the examples of the batches offered for the served checkpoint (its own rollouts and the
   rewards they earned: on-policy data; ``round_examples``). A batch whose behaviour
   log-probabilities do not match the served weights is quarantined (``mismatch``): named in
   the candidate's record, not trained on, never offered again.
2. Hold out a fixed share of users (chosen by a hash of the user id, so a rerun holds out the
   same ones; an interaction without a user goes by its session, else by itself:
   ``release.offpolicy_bound.user_key``): all of a user's interactions are held out or all
   trained on, since one user's interactions are not independent. Update a copy of the
   checkpoint on the rest (``learner``): all its weights, or a LoRA adapter. The round's
   state is saved every few steps (``round_state``), so a round killed midway resumes where
   it stood.
3. The gate's steps (``round_gate``): score the held-out interactions under the candidate
   (``offpolicy``: no new traffic needed) and estimate its gain with a user-level lower bound
   at this parent's attempt's level (``gate.attempt_level``: the n-th candidate trained from
   one parent spends its share of alpha, so retries on the same held-out users cannot wear the
   gate down), run the candidate evals, and weigh the monitors' alarms of the served
   checkpoint against its parent (reward hacking shows there before it shows in the reward).
4. The gate decides; the candidate is registered either way (promoted or rejected, with the
   reasons and figures, the gate's settings and its evidence file, ``release.evidence``), so
   every decision can be traced to its weights and data and recomputed by
   ``rtrl gate evaluate --checkpoint ID``.

Publishing the decision on the ``checkpoints`` topic is the caller's step, after this returns.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from checkpoints.record import CANARY, PROMOTED, REJECTED, CheckpointInfo, TrainingRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import STATE_FILE, load_policy, load_trainer_state, weight_writers
from models.loading import LoraSettings
from models.policy import CausalLMPolicy
from models.scoring import score_examples
from release.canary_config import canary_stage
from release.evidence import FILE as EVIDENCE_FILE
from release.gate import GateDecision
from release.offpolicy_bound import Estimate
from rewards.monitors import Alarm
from trainer.learner import Progress, UpdateStats, update
from trainer.mismatch import BatchMismatch, check_batches
from trainer.round_evals import RoundEvals
from trainer.round_examples import read_round
from trainer.round_gate import judge
from trainer.round_options import RoundOptions
from trainer.round_state import RoundStateFile, round_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    candidate: CheckpointInfo
    decision: GateDecision
    stats: UpdateStats
    estimate: Estimate
    n_train: int
    n_held_out: int
    skipped: dict[str, int]


def behaviour_is_exact(checks: dict[str, BatchMismatch], limit: float) -> bool:
    """Whether the recorded behaviour log-probs may stand for ``pi_old``: every batch was
    checked, on some tokens, and its k3 is within ``limit`` nats a token of the served weights;
    never with ``limit`` 0 or without a check. k3 alone: it is the mean of ``d**2 / 2`` nearly
    (``d`` a token's log-prob gap), so it bounds the gaps token by token, where k1, their mean,
    is noise around 0 on an exact engine (SmolLM2 in f16 over 263 tokens: k1 +4e-4, k3 7e-6).

    >>> ok = BatchMismatch(4e-4, 7e-6, 263, 12, None)
    >>> behaviour_is_exact({"b1": ok}, 1e-4), behaviour_is_exact({"b1": ok}, 0.0)
    (True, False)
    >>> behaviour_is_exact({"b1": ok, "b2": BatchMismatch(0.0, 4e-3, 900, 16, None)}, 1e-4)
    False
    >>> behaviour_is_exact({}, 1e-4)
    False
    """
    return (
        limit > 0
        and bool(checks)
        and all(c.reason is None and c.tokens > 0 and c.k3 <= limit for c in checks.values())
    )


def train_round(registry: CheckpointRegistry, parent_id: str,
                batches: Sequence[tuple[str, Sequence[str | Path]]], candidate_id: str,
                options: RoundOptions, alarms: Sequence[Alarm],
                accelerator: Accelerator | None = None) -> TrainResult | None:  # fmt: skip
    """Train ``candidate_id`` from ``parent_id`` on ``batches`` (``(batch_id, data files)``)
    with ``options``' learner, gate, held-out share and adapter; ``alarms`` are the monitors'
    of the served checkpoint against its parent.

    A candidate that passes the gate is promoted, or with ``options.canary`` registered as a
    canary (``release.canary``: it serves a share of users first, and its live A/B decides).

    ``options.eval_engine``: the candidate evals sample a LoRA candidate and its parent through
    llama.cpp (``trainer.round_evals``), not transformers.

    Under several processes every rank trains its shard; only the main one evaluates and
    registers (the others return None). A saved state of this very round (killed before it
    registered) is resumed from.
    """
    learner, gate, lora = options.learner, options.gate, options.lora
    if not 0 < options.held_out < 1:
        raise ValueError("options.held_out must be between 0 and 1")
    accelerator = accelerator or Accelerator(cpu=True)
    parent_info = registry.get(parent_id)
    data = read_round(parent_info, batches, options.held_out)
    adapter = parent_info.weights.lora or lora
    seconds: dict[str, float] = {}
    with _timed(seconds, "load"):
        policy = load_policy(
            registry, parent_info, new_lora=lora if parent_info.weights.kind != "lora" else None
        )
        policy.to(accelerator.device)
    data.fit_context(getattr(policy.model.config, "max_position_embeddings", None))
    with _timed(seconds, "mismatch"):
        checks = (
            check_batches(policy, data.by_batch(), learner.mismatch_sample,
                          learner.max_mismatch_kl) if learner.mismatch_sample else {}
        )  # fmt: skip
    quarantined = {b: c.reason for b, c in checks.items() if c.reason is not None}
    for batch, reason in quarantined.items():
        log.warning("batch %s quarantined: %s", batch, reason)
    if quarantined and not data.drop_batches(quarantined):
        # the main process records it; every one stops
        raise ValueError(_register_quarantined(
            registry, parent_info, candidate_id, batches, policy, adapter, quarantined,
            checks) if accelerator.is_main_process else "batches quarantined")  # fmt: skip
    same_params = (parent_info.weights.kind == "lora") == (adapter is not None)
    parent_state = load_trainer_state(registry, parent_info) if same_params else None
    reference = reference_info = None
    if learner.kl_coef > 0:
        with _timed(seconds, "reference"):
            reference_info = registry.get(registry.root_of(parent_id))
            reference_policy = load_policy(registry, reference_info)
            reference = score_examples(reference_policy.to(accelerator.device), data.train)
            del reference_policy
    key = round_key(
        parent=parent_id,
        batches=[b for b, _ in batches],
        candidate=candidate_id,
        learner=asdict(learner),
        lora=adapter.model_dump() if adapter else None,
    )
    state_file = RoundStateFile(registry.root, candidate_id, key)

    def resume() -> tuple[Progress, dict[str, Any]] | None:
        saved = state_file.load_into(policy)
        if saved is None:
            return None
        log.info(
            "resuming round %s from its saved state at step %d", candidate_id, saved.progress.step
        )
        return saved.progress, saved.optimizer_state

    def save_state(progress: Progress, optimizer_state: dict[str, Any]) -> None:
        if accelerator.is_main_process and learner.save_every and (
                progress.step % learner.save_every == 0):  # fmt: skip
            state_file.save(policy, progress, optimizer_state)

    exact = behaviour_is_exact(checks, learner.exact_behaviour_kl)
    if exact:
        log.info("pi_old is the recorded behaviour log-probs: every batch's mismatch is within "
                 "%g nats a token", learner.exact_behaviour_kl)  # fmt: skip
    round_evals = RoundEvals(
        policy, gate, options.eval_engine, adapter, accelerator.is_main_process
    )
    with _timed(seconds, "update"):
        result = update(
            policy,
            data.train,
            learner,
            accelerator,
            baseline=parent_info.training.state,
            reference=reference,
            optimizer_state=parent_state["optimizer"] if parent_state else None,
            old_is_behaviour=exact,
            resume=resume,
            on_step=save_state,
        )
    if not accelerator.is_main_process:
        return None
    outcome = judge(registry, parent_info, candidate_id, policy, data.held, alarms, options,
                    round_evals)  # fmt: skip
    seconds.update(outcome.seconds)
    log.info("round %s took %s", candidate_id,
             ", ".join(f"{name} {s:.0f}s" for name, s in seconds.items()))  # fmt: skip
    decision = outcome.decision
    evals = {
        "offpolicy": asdict(outcome.estimate),
        "gate": {
            **decision.figures,
            "attempt": float(outcome.attempt),
            "seed": float(learner.seed),
        },  # fmt: skip
        "gate_config": asdict(gate),
        "evidence": {
            "file": EVIDENCE_FILE,
            "sha256": hashlib.sha256(outcome.evidence).hexdigest(),
            "rows": outcome.evidence_rows,
        },
        "update": asdict(result.stats),
        "learner": asdict(learner),
        "n_train": len(data.train),
        "n_held_out": len(data.held),
        "n_held_out_censored": sum(e.reward is None for e in data.held),
        "skipped": dict(data.skipped),
        "mismatch": {b: asdict(c) for b, c in checks.items()},
        "quarantined": quarantined,
        "alarms": outcome.alarms,
        "candidate_evals": [asdict(t) for t in outcome.tests],
        "candidate_evals_by": outcome.evals_by,
        "device": str(accelerator.device),
        "processes": accelerator.num_processes,
        "seconds": {name: round(s, 1) for name, s in seconds.items()},
    }
    if options.canary is not None and decision.passed:
        evals["canary"] = canary_stage(candidate_id, options.canary)
    weights, files = weight_writers(policy, adapter, result.optimizer_state)
    files[EVIDENCE_FILE] = lambda path: _write(path, outcome.evidence)
    training = TrainingRef(
        step=parent_info.training.step + result.stats.grad_steps,
        state=result.baseline,
        file=STATE_FILE,
        sha256="0" * 64,
        **_reference_ref(reference_info),
    )
    info = registry.register(
        checkpoint_id=candidate_id,
        parent=parent_id,
        model=parent_info.model,
        weights=weights,
        training=training,
        files=files,
        evals=evals,
        batches=tuple(b for b, _ in batches),
        status=(CANARY if options.canary else PROMOTED) if decision.passed else REJECTED,
        reasons=decision.reasons,
    )
    state_file.remove()
    return TrainResult(info, decision, result.stats, outcome.estimate, len(data.train),
                       len(data.held), dict(data.skipped))  # fmt: skip


@contextmanager
def _timed(seconds: dict[str, float], stage: str) -> Iterator[None]:
    """Add the wall time of the block to ``seconds[stage]``: a round's record says where its
    minutes went."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started


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


def _register_quarantined(registry: CheckpointRegistry, parent: CheckpointInfo, candidate_id: str,
                          batches: Sequence[tuple[str, Sequence[str | Path]]],
                          policy: CausalLMPolicy, adapter: LoraSettings | None,
                          quarantined: dict[str, str],
                          checks: dict[str, BatchMismatch]) -> str:  # fmt: skip
    """Nothing is left to train on once the quarantined batches are out: the candidate is
    registered rejected with the parent's weights and the reasons, so that its batches are
    never offered again. Returns what the round's error says."""
    weights, files = weight_writers(policy, adapter, None)
    reasons = tuple(f"batch {b} quarantined: {r}" for b, r in quarantined.items())
    registry.register(
        checkpoint_id=candidate_id,
        parent=parent.checkpoint_id,
        model=parent.model,
        weights=weights,
        training=TrainingRef(step=parent.training.step, state=parent.training.state),
        files=files,
        evals={
            "mismatch": {b: asdict(c) for b, c in checks.items()},
            "quarantined": quarantined,
            "n_train": 0,
            "n_held_out": 0,
        },  # fmt: skip
        batches=tuple(b for b, _ in batches),
        status=REJECTED,
        reasons=(*reasons, "too few examples left to train and hold out"),
    )
    return f"{candidate_id} rejected untrained: " + "; ".join(reasons)
