"""`rtrl gate evaluate`: a gate decision recomputed from its evidence file, without the model.

Every ``rtrl train`` decision leaves its evidence (``release.evidence``) in the candidate's
checkpoint directory with the gate's settings in its record; ``--checkpoint ID`` re-runs that
decision with those settings (and its recorded monitor and eval alarms, which the evidence does
not hold) and says whether it reproduced the recorded figures. ``--evidence FILE`` judges any
evidence file with the settings given as flags. Imports no torch: an audit needs none.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
from pathlib import Path
from typing import Any

from infra.settings_cli import add_command, add_group
from release.cli_options import GATE_OPTIONS

log = logging.getLogger("rtrl.gate")
_COMPARED = ("value", "behaviour_mean", "lower", "level", "ess", "kl", "n", "users")


def register(sub: argparse._SubParsersAction) -> None:
    gsub = add_group(
        sub,
        "gate",
        help="recompute and audit gate decisions from their evidence files",
        description="The offline gate's decision (clipped importance weights on rewards "
        "shifted into the reward configuration's range, a one-sided lower bound of the gain "
        "over users: CR2 standard error and a t quantile at the fewer of Bell-McCaffrey and "
        "Imbens-Kolesar degrees of freedom; censored rows (reward null) kept; "
        "alpha split over a parent's attempts; KL, ESS, example and user limits) from "
        "evidence files: JSON lines or Parquet, one row per held-out interaction with "
        "user_id, interaction_id, reward, behaviour_logprobs, candidate_logprobs and optional "
        "session_id.",
    )
    add_command(
        gsub,
        "evaluate",
        _evaluate,
        GATE_OPTIONS,
        help="one decision per evidence file or checkpoint",
    )


def _evaluate(args: argparse.Namespace) -> int:
    import orjson

    options = GATE_OPTIONS.read(args)
    if not options.evidence and not options.checkpoint:
        log.error("name --evidence FILE... or --checkpoint ID")
        return 2
    outcomes = []
    try:
        config = options.config(*_reward_range(options.reward_config))
        for path in options.evidence:
            outcome = _judge(path, config, options.attempt or 1, options.seed, [])
            if options.attempt is None:
                outcome["attempt_assumed"] = True
            outcomes.append(outcome)
        for checkpoint in options.checkpoint:
            outcomes.append(_rejudge(options.registry, checkpoint))
    except (KeyError, ValueError, OSError) as exc:
        log.error("%s", exc.args[0] if exc.args else exc)
        return 2
    for outcome in outcomes:
        if options.json:
            print(orjson.dumps(outcome).decode())
        else:
            print(_render(outcome), end="")
    if any(o.get("reproduced") is False for o in outcomes):
        return 4
    return 0 if all(o["passed"] for o in outcomes) else 3


def _reward_range(path: Path | None) -> tuple[float, float]:
    from rewards.config import RewardConfig, load_config

    return (load_config(path) if path else RewardConfig()).reward_range()


def _judge(path: Path, config: Any, attempt: int, seed: int, alarms: list[str],
           method: str | None = None) -> dict[str, Any]:  # fmt: skip
    from release.evidence import estimate_rows, read_evidence
    from release.gate import attempt_level, decide

    estimate = estimate_rows(read_evidence(path), level=attempt_level(config.level, attempt),
                             resamples=config.resamples, seed=seed,
                             weight_cap=config.weight_cap, reward_min=config.reward_min,
                             reward_max=config.reward_max,
                             method=method)  # fmt: skip
    decision = decide(estimate, [], config, alarms)
    return {
        "file": str(path),
        "passed": decision.passed,
        "estimate": estimate.value,
        "gain": estimate.gain,
        "lower": estimate.lower,
        "level": estimate.level,
        "ess": estimate.ess,
        "kl": estimate.kl,
        "n": estimate.n,
        "users": estimate.users,
        "method": estimate.method,
        "reasons": list(decision.reasons),
        "attempt": attempt,
        "censored": estimate.censored,
        "behaviour_mean": estimate.behaviour_mean,
        "df": estimate.df,
        "reward_min": estimate.reward_min,
        "reward_max": estimate.reward_max,
    }


def _rejudge(registry_dir: Path, checkpoint_id: str) -> dict[str, Any]:
    """A registered decision re-run from its evidence, with whether it matches the record."""
    from checkpoints.store import CheckpointRegistry
    from release.evidence import FILE
    from release.gate import GateConfig

    info = CheckpointRegistry(registry_dir).get(checkpoint_id)
    evidence = info.evals.get("evidence")
    if not evidence or "gate_config" not in info.evals:
        raise ValueError(f"checkpoint {checkpoint_id} holds no gate evidence (trained before it)")
    known = {f.name for f in dataclasses.fields(GateConfig)}
    config = GateConfig(**{k: v for k, v in info.evals["gate_config"].items() if k in known})
    gate = info.evals["gate"]
    path = info.file(evidence.get("file", FILE))
    # what decide added besides the estimate: the recorded alarms, in the order it gives them
    alarms = [f"monitor alarm: {message}" for message in info.evals.get("alarms", [])]
    alarms += [t["message"] for t in info.evals.get("candidate_evals", []) if t.get("alarm")]
    alarms += info.evals.get("tool_opening_alarms", [])
    # the bound the record names (a decision from before the CR2 bound was a percentile one)
    method = gate.get("method")
    outcome = _judge(path, config, int(gate["attempt"]), int(gate["seed"]), alarms, method)
    new = {**outcome, "value": outcome["estimate"]}
    same = all(_same(gate.get(k), new[k]) for k in _COMPARED)
    same = same and list(info.reasons) == outcome["reasons"]
    return {**outcome, "checkpoint": checkpoint_id, "reproduced": same}


def _same(recorded: Any, now: Any) -> bool:
    """Equal to the last digit; a non-finite figure was recorded as null."""
    if recorded is None:
        return isinstance(now, float) and not math.isfinite(now)
    return float(recorded) == float(now)


def _render(o: dict[str, Any]) -> str:
    verdict = "PASSED" if o["passed"] else "REJECTED"
    head = f"{o.get('checkpoint') or o['file']}: {verdict}"
    if "reproduced" in o:
        head += " (reproduces the record)" if o["reproduced"] else " (DIFFERS from the record)"
    lines = [
        head,
        f"  estimate {o['estimate']:.4f}, gain {o['gain']:+.4f}, its {o['level']:.2%} lower "
        f"bound {o['lower']:+.4f} (attempt {o['attempt']}"
        f"{', assumed: no --attempt given' if o.get('attempt_assumed') else ''}, {o['method']})",
        f"  n {o['n']}, users {o['users']}, ESS {o['ess']:.1f}, KL {o['kl']:.4f}, "
        f"rewards in [{o['reward_min']:g}, {o['reward_max']:g}]",
    ]
    lines += [f"  {reason}" for reason in o["reasons"]]
    return "\n".join(lines) + "\n"
