"""A round's gate: whether the trained candidate may serve, decided on evidence its parent's
traffic already gave (``release.gate``).

1. The attempt: the n-th candidate trained from one parent reserves number n
   (``checkpoints.attempts``) and its bound is taken at that attempt's level
   (``release.gate.attempt_level``: each spends its share of alpha, so retries on the same
   held-out users cannot wear the gate down).
2. The off-policy estimate: the held-out interactions scored under the candidate
   (``release.offpolicy``, no new traffic needed) and its gain's user-level lower bound
   (``release.evidence``); those rows are the evidence file the record keeps.
3. The cheap checks first: the decision on the estimate (minimum evidence, the bound, KL, ESS),
   the monitors' alarms of the served checkpoint against its parent (reward hacking shows
   there before it shows in the reward) and, with ``gate.tool_opening``, the candidate's
   probability of opening an agent task with a tool call against its parent's
   (``release.tool_opening``: scored, seconds). The opening check runs whatever the others
   say, so a candidate that learned to avoid its tools is named for it even when its bound or
   KL already rejects it. A candidate they reject is rejected at once: the candidate evals
   (minutes of sampling) could not change that decision.
4. Otherwise the candidate evals: the candidate's behaviour against its parent's
   (``round_evals``); the decision adds their alarms.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from checkpoints.attempts import reserve_attempt
from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from models.policy import CausalLMPolicy
from release.candidate_evals import RateTest
from release.evidence import estimate_rows, evidence_bytes
from release.gate import GateDecision, attempt_level, decide
from release.offpolicy import evidence_rows
from release.offpolicy_bound import Estimate
from release.tool_opening import OpeningCheck
from rewards.monitors import Alarm
from trainer.round_evals import RoundEvals
from trainer.round_examples import RoundExamples
from trainer.round_options import RoundOptions


@dataclass(frozen=True)
class GateOutcome:
    """What the gate found and decided, as the candidate's record keeps it."""

    attempt: int
    estimate: Estimate
    evidence: bytes  # the evidence file: one JSON line per held-out interaction
    evidence_rows: int
    earlier_rows: int  # of them, interactions earlier checkpoints of the line served
    tests: list[RateTest]  # the candidate evals
    opening: OpeningCheck | None  # the tool-opening check, blocking or not (gate.tool_opening)
    opening_alarms: list[str]  # its message again when it blocks
    evals_by: str  # the engine that sampled them
    alarms: list[str]  # the monitors'
    decision: GateDecision
    seconds: dict[str, float]  # wall time by stage: gate_scoring, candidate_evals


def attempt_of(registry: CheckpointRegistry, parent_id: str, org_id: str | None = None) -> int:
    """1 + the gate decisions ``parent_id``'s earlier candidates in ``org_id``'s line (None: the
    shared line) recorded (promoted, rejected or canary alike: each spent its alpha): where a
    new reservation starts (``checkpoints.attempts.reserve_attempt`` takes the lowest free
    number from there). Each line spends its own alpha: another organisation's attempts on the
    same parent are judged on other users and count in its own family."""
    return 1 + sum(info.parent == parent_id and info.org_id == org_id and "gate" in info.evals
                   for info in registry.list())  # fmt: skip


def judge(registry: CheckpointRegistry, parent: CheckpointInfo, candidate_id: str,
          candidate: CausalLMPolicy, data: RoundExamples, alarms: Sequence[Alarm],
          options: RoundOptions, evals: RoundEvals) -> GateOutcome:  # fmt: skip
    """The gate's steps for ``candidate`` (trained from ``parent``, to be registered as
    ``candidate_id``) on the round's held-out examples, and on the earlier checkpoints' with
    the parent's scores of them (both arms off-policy), under ``options.gate``."""
    held = data.held
    gate, seed = options.gate, options.learner.seed
    attempt = reserve_attempt(registry.root, parent.checkpoint_id, candidate_id,
                              attempt_of(registry, parent.checkpoint_id, options.org),
                              options.org)  # fmt: skip
    started = time.perf_counter()
    rows = evidence_rows(candidate, held)
    own_rows = len(rows)
    # the both-arms estimate is the centred one: with a nucleus in the parent's own rows the
    # bound is the clipped one, and the earlier rows are left out
    if data.earlier and all(row.full_support for row in rows):
        rows += evidence_rows(candidate, data.earlier, data.earlier_scores)
    estimate = estimate_rows(rows, level=attempt_level(gate.level, attempt),
                             resamples=gate.resamples, seed=seed, weight_cap=gate.weight_cap,
                             reward_min=gate.reward_min, reward_max=gate.reward_max)  # fmt: skip
    check = evals.opening_check(candidate)  # scored, not sampled: run whatever the rest say
    opening = check.alarms if check is not None else []
    scored = time.perf_counter()
    decision = decide(estimate, alarms, gate, opening)  # the cheap checks: evals cannot undo a "no"
    tests: list[RateTest] = []
    if decision.passed:
        tests = evals.run(registry, parent, candidate_id, candidate, held, seed)
        decision = decide(estimate, alarms, gate, [t.message for t in tests if t.alarm] + opening)
    seconds = {"gate_scoring": scored - started, "candidate_evals": time.perf_counter() - scored}
    return GateOutcome(attempt, estimate, evidence_bytes(rows), len(rows), len(rows) - own_rows,
                       tests,
                       check, opening,
                       evals.by, [a.message for a in alarms], decision, seconds)  # fmt: skip
