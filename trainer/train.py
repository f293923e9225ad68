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
4. The gate decides; the candidate is registered either way (``round_record``: promoted,
   a canary or rejected, with the reasons and figures, the gate's settings and its evidence
   file, ``release.evidence``), so every decision can be traced to its weights and data and
   recomputed by ``rtrl gate evaluate --checkpoint ID``.

Publishing the decision on the ``checkpoints`` topic is the caller's step, after this returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, load_trainer_state
from models.examples import Example
from models.loading import LoraSettings
from models.policy import CausalLMPolicy
from models.scoring import score_examples
from release.gate import GateDecision
from release.offpolicy_bound import Estimate
from rewards.monitors import Alarm
from trainer.inputs import attempts_on
from trainer.learner import LearnerConfig, Progress, UpdateStats, UpdateStopped, update
from trainer.mismatch import BatchMismatch, check_batches
from trainer.round_evals import RoundEvals
from trainer.round_examples import RoundExamples, read_earlier, read_round
from trainer.round_gate import judge
from trainer.round_options import RoundOptions
from trainer.round_record import (
    TrainedCandidate,
    register_candidate,
    register_quarantined,
    round_record,
)
from trainer.round_state import RoundStateFile, RoundStopped, round_key

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
                accelerator: Accelerator | None = None,
                stop: threading.Event | None = None,
                earlier: Sequence[tuple[str, str, Sequence[str | Path]]] = (),
                ) -> TrainResult | None:  # fmt: skip
    """Train ``candidate_id`` from ``parent_id`` on ``batches`` (``(batch_id, data files)``)
    with ``options``' settings, judge it (``alarms``: the monitors' of the served checkpoint
    against its parent) and register it: the module docstring's steps, in order. ``earlier``:
    ``(batch_id, checkpoint_id, files)`` earlier checkpoints of the line served, whose held-out
    users judge the candidate too, scored by the parent (``options.evidence_depth``).

    Under several processes every rank trains its shard; only the main one evaluates and
    registers (the others return None). A saved state of this very round (killed before it
    registered) is resumed from. ``stop`` set (SIGTERM) ends the round between its stages or
    micro-batches with :class:`RoundStopped`, the update's state saved; the gate's evals, once
    begun, run to their end.
    """
    if not 0 < options.held_out < 1:
        raise ValueError("options.held_out must be between 0 and 1")
    accelerator = accelerator or Accelerator(cpu=True)
    learner, main = options.learner, accelerator.is_main_process
    parent, batch_ids = registry.get(parent_id), tuple(b for b, _ in batches)
    data = _read(registry, parent, batches, earlier, options)
    adapter = parent.weights.lora or options.lora
    seconds: dict[str, float] = {}
    stopping = _stopping(stop, candidate_id)
    stopping("reading its batches")
    with _timed(seconds, "load"):
        policy = _load(registry, parent, options.lora, accelerator)
    stopping("loading")
    data.fit_context(getattr(policy.model.config, "max_position_embeddings", None))
    with _timed(seconds, "mismatch"):
        checks = _mismatch_checks(policy, data, learner)
    stopping("the mismatch check")
    if not data.quarantine(checks):  # the main process records it; every one stops
        quarantined = "batches quarantined"
        if main:
            quarantined = register_quarantined(registry, parent, candidate_id, batch_ids, policy,
                                               adapter, data, options.org)  # fmt: skip
        raise ValueError(quarantined)
    with _timed(seconds, "earlier_scoring"):  # by the parent: before its update
        data.earlier_scores = score_examples(policy, data.earlier) if data.earlier else []
    same_params = (parent.weights.kind == "lora") == (adapter is not None)
    parent_state = load_trainer_state(registry, parent) if same_params else None
    reference_info, reference = _reference(registry, parent_id, data.train, learner,
                                           accelerator, seconds)  # fmt: skip
    stopping("scoring the reference")
    key = round_key(parent=parent_id, batches=list(batch_ids), candidate=candidate_id,
                    learner=asdict(learner),
                    lora=adapter.model_dump() if adapter else None)  # fmt: skip
    state_file = RoundStateFile(registry.root, candidate_id, key)
    resume, save_state = _resumable(state_file, candidate_id, policy, learner, main)
    exact = _old_is_behaviour(checks, learner)
    round_evals = RoundEvals(policy, options.gate, options.eval_engine, adapter, main)
    try:
        with _timed(seconds, "update"):
            result = update(policy, data.train, learner, accelerator,
                            reference=reference,
                            optimizer_state=parent_state["optimizer"] if parent_state else None,
                            old_is_behaviour=exact, resume=resume, on_step=save_state,
                            gate_max_kl=options.gate.max_kl,
                            should_stop=stop.is_set if stop is not None else None)  # fmt: skip
    except UpdateStopped as stopped:
        if main and stopped.progress.step:
            state_file.save(policy, stopped.progress, stopped.optimizer_state)
        raise RoundStopped(candidate_id, f"its update, after step {stopped.progress.step}",
                           saved=main and stopped.progress.step > 0) from None  # fmt: skip
    if not main:
        return None
    outcome = judge(registry, parent, candidate_id, policy, data, alarms, options, round_evals)
    seconds.update(outcome.seconds)
    log.info("round %s took %s", candidate_id,
             ", ".join(f"{name} {s:.0f}s" for name, s in seconds.items()))  # fmt: skip
    evals = round_record(outcome, result.stats, data, options, accelerator, seconds)
    trained = TrainedCandidate(policy, adapter, result, reference_info)
    info = register_candidate(registry, parent, candidate_id, batch_ids, trained, outcome, evals,
                              options)  # fmt: skip
    state_file.remove()
    return TrainResult(info, outcome.decision, result.stats, outcome.estimate, len(data.train),
                       len(data.held), dict(data.skipped))  # fmt: skip


def _read(registry: CheckpointRegistry, parent: CheckpointInfo,
          batches: Sequence[tuple[str, Sequence[str | Path]]],
          earlier: Sequence[tuple[str, str, Sequence[str | Path]]],
          options: RoundOptions) -> RoundExamples:  # fmt: skip
    """The round's examples: its batches' (the training window counted in the line's attempts
    on the parent) and the held-out users of the earlier checkpoints' batches."""
    attempts = attempts_on(registry, parent.checkpoint_id, options.org)
    data = read_round(parent, batches, options.held_out, options.org, options.own_only,
                      options.train_window, attempts)  # fmt: skip
    if earlier:
        data.earlier, data.earlier_skipped = read_earlier(
            parent, earlier, options.held_out, options.org, options.own_only
        )
    return data


def _stopping(stop: threading.Event | None, candidate_id: str) -> Callable[[str], None]:
    """A round's check between its stages: out with :class:`RoundStopped` once ``stop`` is set
    (nothing saved yet: the update saves its own state)."""

    def check(stage: str) -> None:
        if stop is not None and stop.is_set():
            raise RoundStopped(candidate_id, stage, saved=False)

    return check


def _old_is_behaviour(checks: dict[str, BatchMismatch], learner: LearnerConfig) -> bool:
    """Whether the update takes ``pi_old`` as the recorded log-probs (:func:`behaviour_is_exact`),
    said in the log when it does."""
    exact = behaviour_is_exact(checks, learner.exact_behaviour_kl)
    if exact:
        log.info("pi_old is the recorded behaviour log-probs: every batch's mismatch is within "
                 "%g nats a token", learner.exact_behaviour_kl)  # fmt: skip
    return exact


def _load(registry: CheckpointRegistry, parent: CheckpointInfo, lora: LoraSettings | None,
          accelerator: Accelerator) -> CausalLMPolicy:  # fmt: skip
    """The parent's policy on the accelerator's device: a new ``lora`` adapter over its weights,
    unless the parent is an adapter already (then that one trains on)."""
    policy = load_policy(registry, parent, new_lora=lora if parent.weights.kind != "lora" else None)
    policy.to(accelerator.device)
    return policy


def _mismatch_checks(policy: CausalLMPolicy, data: RoundExamples,
                     learner: LearnerConfig) -> dict[str, BatchMismatch]:  # fmt: skip
    """Each batch's mismatch between its recorded log-probs and the parent's (none when
    ``learner.mismatch_sample`` is 0)."""
    if not learner.mismatch_sample:
        return {}
    return check_batches(policy, data.by_batch(), learner.mismatch_sample,
                         learner.max_mismatch_kl, round_max=learner.mismatch_round_max)  # fmt: skip


def _reference(registry: CheckpointRegistry, parent_id: str, train: Sequence[Example],
               learner: LearnerConfig, accelerator: Accelerator, seconds: dict[str, float]
               ) -> tuple[CheckpointInfo | None, list[torch.Tensor] | None]:  # fmt: skip
    """The KL penalty's reference, the lineage's first checkpoint, and its log-probabilities of
    the ``train`` examples' tokens; neither without a penalty (``learner.kl_coef`` 0)."""
    if learner.kl_coef <= 0:
        return None, None
    with _timed(seconds, "reference"):
        reference = registry.get(registry.root_of(parent_id))
        reference_policy = load_policy(registry, reference)
        return reference, score_examples(reference_policy.to(accelerator.device), train)


def _resumable(state_file: RoundStateFile, candidate_id: str, policy: CausalLMPolicy,
               learner: LearnerConfig, main_process: bool) -> tuple[
                   Callable[[], tuple[Progress, dict[str, Any]] | None],
                   Callable[[Progress, dict[str, Any]], None]]:  # fmt: skip
    """The update's ``resume`` (a saved state of this very round, applied to ``policy``) and
    ``on_step`` (the main process saves the state every ``learner.save_every`` steps)."""

    def resume() -> tuple[Progress, dict[str, Any]] | None:
        saved = state_file.load_into(policy)
        if saved is None:
            return None
        log.info(
            "resuming round %s from its saved state at step %d", candidate_id, saved.progress.step
        )
        return saved.progress, saved.optimizer_state

    def save_state(progress: Progress, optimizer_state: dict[str, Any]) -> None:
        if main_process and learner.save_every and progress.step % learner.save_every == 0:
            state_file.save(policy, progress, optimizer_state)

    return resume, save_state


@contextmanager
def _timed(seconds: dict[str, float], stage: str) -> Iterator[None]:
    """Add the wall time of the block to ``seconds[stage]``: a round's record says where its
    minutes went."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started
