"""`.rtrl/run/summary.json`: what `rtrl run` found, for scripts and for the report page.

One JSON document (the model :class:`RunSummary`, documented field by field in
``docs/run-summary.md``): the training rounds, every checkpoint with the gate's decision and its
reasons, the cycle-time table and the closing A/B test's metrics as ``{name, control, treatment,
change, ci_low, ci_high, p}``. The metric names are the warehouse's A/B metrics
(``warehouse.ab_mart.METRICS``) and are stable: a script may key on them.

Pure apart from :func:`write_summary` and :func:`read_summary`; built from plain figures, so a
test builds one without running the loop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
SEED_METRICS = ("kept_share", "dissatisfied_rate", "latency_mean_ms")
"""The three headline metrics of the seed: edits kept, dissatisfied follow-ups, latency."""
WAITING = "waiting"  # a round's gate decision when nothing was judged (Round.gate_decision)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Round(_Model):
    """One training round: the users served by one checkpoint, and the candidate trained on
    what they did."""

    round: int = Field(ge=1)
    served_by: str
    users: int = Field(ge=0)
    accepted_share: float
    invalid_tool_call_share: float
    question_share: float
    taste: float  # the simulated users' hidden taste of the served policy (never trained on)
    mean_reward: float | None  # measured by the platform (the rewards mart)
    candidate: str | None  # the checkpoint trained on this round's data; None after the last
    # the gate's decision on that candidate; "waiting": the round's held-out evidence was below
    # the gate's minimums, so nothing was judged and its batch carried over to the next round
    gate_decision: str | None = None
    # the code world's (None in the token world): shares of the round's interactions whose code
    # passed the hidden tests, whose edit was kept, with a dissatisfied follow-up; and the
    # served checkpoint's pass rate on the held-out tasks over so many answers
    pass_share: float | None = None
    edits_kept_share: float | None = None
    dissatisfied_share: float | None = None
    held_out_pass_rate: float | None = None
    held_out_answers: int | None = None
    # the agent world's (None elsewhere): every tool call the model made in the round's runs,
    # and the share of them that were invalid (``pass_share`` is then the tasks solved)
    tool_calls: int | None = None
    broken_tool_call_share: float | None = None
    # answers served in the round whose rollout the gateway refused (a token llama.cpp gave
    # without its probability): never trained on or judged; None where not counted
    rollouts_refused: int | None = Field(None, ge=0)


class Checkpoint(_Model):
    """One checkpoint of the run's lineage and the gate's decision on it (``root``: the first,
    never gated)."""

    checkpoint_id: str
    parent: str | None
    status: Literal["root", "promoted", "rejected", "canary"]
    reasons: list[str]
    """Why: every failing rule when rejected; the figures that passed when promoted."""
    gate: dict[str, float | str] = Field(default_factory=dict)  # the numbers the rules read
    # the code world's: its pass rate on the held-out tasks over so many answers (None when
    # not measured), every checkpoint's, the rejected and the last promoted included
    held_out_pass_rate: float | None = None
    held_out_answers: int | None = None


class Metric(_Model):
    """One metric of the closing A/B test, treatment against control. ``change`` and its
    interval are relative (0.05 is +5 %); None where the data cannot say (no data in an arm,
    or a control of 0)."""

    name: str
    label: str
    control: float | None
    treatment: float | None
    change: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None


class AbTest(_Model):
    """One treatment arm of an experiment against its control arm."""

    experiment: str
    closing: bool  # the last promoted checkpoint against the first (else the run's first A/B)
    control_arm: str
    treatment_arm: str
    n_users: int  # in the treatment arm
    n_interactions: int  # in the treatment arm
    metrics: list[Metric]

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


class Cycle(_Model):
    """Wall seconds per stage of one cycle (first user served to the next checkpoint serving)."""

    cycle: int = Field(ge=1)
    stages: dict[str, float]
    total_s: float


class RunSummary(_Model):
    schema_version: Literal[1] = 1  # SCHEMA_VERSION
    world: Literal["tokens", "code", "agent"] = "tokens"  # rtrl run --world
    rounds: list[Round]
    checkpoints: list[Checkpoint]
    ab: list[AbTest]  # one per treatment arm of the experiment the run closed with
    cycles: list[Cycle]
    stage_names: list[str]  # the cycle table's columns, in order
    # of the cycles' time, the share spent waiting on reward windows to close (stage settle)
    settle_share: float | None = Field(None, ge=0, le=1)
    loop_s: float | None = Field(None, ge=0)  # the whole run, broker start to report, wall
    # the closing A/B's wall seconds by how its arms were served ("server per arm", and with
    # --ab-compare-servers "one server"); None without a closing A/B
    closing_ab_s: dict[str, float] | None = None


def passing_reasons(gate: Mapping[str, Any]) -> list[str]:
    """What a promoted candidate passed, in the gate's own figures.

    >>> passing_reasons({"gain": 0.031, "lower": 0.004, "level": 0.95, "kl": 0.1, "ess": 80.0,
    ...                  "n": 100.0})
    ['gain +0.031, its 95% lower bound +0.004 above the minimum', 'KL 0.100', 'ESS 80 of 100']

    A later attempt's level is printed to four figures, as the gate prints it (never "100%"):

    >>> passing_reasons({"gain": 0.245, "lower": 0.07, "level": 0.9966226})[0]
    'gain +0.245, its 99.66% lower bound +0.070 above the minimum'
    """
    out = []
    if "gain" in gate and "lower" in gate:
        percent = 100 * float(gate.get("level", 0.95))
        out.append(f"gain {gate['gain']:+.3f}, its {percent:.4g}% lower bound {gate['lower']:+.3f} "
                   "above the minimum")  # fmt: skip
    if "kl" in gate:
        out.append(f"KL {gate['kl']:.3f}")
    if "ess" in gate and "n" in gate:
        out.append(f"ESS {gate['ess']:.0f} of {gate['n']:.0f}")
    return out


def checkpoint(checkpoint_id: str, parent: str | None, status: str, reasons: Sequence[str],
               gate: Mapping[str, Any],
               held_out: tuple[float, int] | None = None) -> Checkpoint:  # fmt: skip
    """A registry entry as the summary shows it: the first checkpoint is the ``root``;
    ``held_out``: its held-out pass rate and answers, where measured."""
    kept = {k: v for k, v in gate.items() if isinstance(v, str) or _finite(v)}
    rate, answers = held_out if held_out else (None, None)
    if parent is None:
        return Checkpoint(checkpoint_id=checkpoint_id, parent=None, status="root", reasons=[],
                          held_out_pass_rate=rate, held_out_answers=answers)  # fmt: skip
    why = list(reasons) if status != "promoted" else passing_reasons(kept)
    return Checkpoint(checkpoint_id=checkpoint_id, parent=parent, status=status,  # type: ignore[arg-type]
                      reasons=why, gate=kept, held_out_pass_rate=rate,
                      held_out_answers=answers)  # fmt: skip


def cycles(table: Sequence[Mapping[str, float]]) -> list[Cycle]:
    return [Cycle(cycle=n, stages=dict(c), total_s=sum(c.values()))
            for n, c in enumerate(table, start=1)]  # fmt: skip


def write_summary(path: Path, summary: RunSummary) -> Path:
    """Write atomically (a script polling the file never reads half of it)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_summary(path: Path) -> RunSummary:
    return RunSummary.model_validate_json(path.read_text(encoding="utf-8"))


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
