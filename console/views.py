"""The page's decisions, built from the registry's records (JSON dicts, as
``CheckpointInfo.to_json_dict`` writes them, with ``decision``): pure, so each piece is tested
without a browser, a server or a registry on disk.

* what serves now: the latest promoted checkpoint and a live canary beside it, with each arm's
  share of users;
* every candidate (a checkpoint with a parent) with its gate decision, its reasons and links that
  re-run the decision from its evidence;
* each canary's course, look by look: the live reward's difference (canary - parent) with its
  anytime-valid bounds, beside the non-inferiority margin it is judged against;
* the mismatch KL of each batch a round trained on, and the reward-hacking monitors' alarms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

PROMOTED, CANARY = "promoted", "canary"
REWARD = "mean_reward"  # the canary's reward comparison (release.canary.REWARD)


def serving(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The promoted checkpoint (the latest) and each live canary's share of users.

    >>> recs = [{"checkpoint_id": "c0", "status": "promoted", "parent": None, "evals": {}},
    ...         {"checkpoint_id": "c1", "status": "canary", "parent": "c0",
    ...          "evals": {"canary": {"percent": 10.0, "experiment": "canary-c1"}}}]
    >>> [(a["arm"], a["checkpoint_id"], a["percent"]) for a in serving(recs)["arms"]]
    [('parent', 'c0', 90.0), ('canary', 'c1', 10.0)]
    """
    promoted = [r for r in records if r["status"] == PROMOTED]
    current = promoted[-1]["checkpoint_id"] if promoted else None
    canaries = [r for r in records if r["status"] == CANARY]
    arms: list[dict[str, Any]] = []
    experiment = None
    if canaries:
        live = canaries[-1]
        stage = live["evals"].get("canary", {})
        percent = float(stage.get("percent", 0.0))
        experiment = stage.get("experiment")
        arms = [
            {"arm": "parent", "checkpoint_id": live["parent"], "percent": 100.0 - percent},
            {"arm": "canary", "checkpoint_id": live["checkpoint_id"], "percent": percent},
        ]
    elif current is not None:
        arms = [{"arm": "all users", "checkpoint_id": current, "percent": 100.0}]
    return {"promoted": current, "canary": canaries[-1]["checkpoint_id"] if canaries else None,
            "experiment": experiment, "arms": arms}  # fmt: skip


def rerun_links(record: dict[str, Any]) -> dict[str, str]:
    """The console's routes that re-run a decision from the evidence it left (``rtrl gate
    evaluate --checkpoint``, ``rtrl canary evaluate --checkpoint``).

    >>> rerun_links({"checkpoint_id": "c1", "evals": {"evidence": {"file": "g.jsonl"},
    ...              "gate_config": {}, "canary": {"evidence": "canary_evidence.jsonl"}}})
    {'gate': '/api/rerun/gate/c1', 'canary': '/api/rerun/canary/c1'}
    """
    evals, cid = record["evals"], record["checkpoint_id"]
    links = {}
    if evals.get("evidence") and "gate_config" in evals:
        links["gate"] = f"/api/rerun/gate/{cid}"
    if (evals.get("canary") or {}).get("evidence"):
        links["canary"] = f"/api/rerun/canary/{cid}"
    return links


def candidates(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every gated checkpoint, newest first: its status, the gate's figures and reasons."""
    out = []
    for r in records:
        if r["parent"] is None:
            continue
        d = r["decision"]
        canary = d.get("canary") or {}
        out.append({
            "checkpoint_id": r["checkpoint_id"], "parent": r["parent"], "status": r["status"],
            "created_at": r["created_at"], "estimate": d.get("estimate"), "bound": d.get("bound"),
            "level": d.get("level"), "ess": d.get("ess"), "kl": d.get("kl"), "n": d.get("n"),
            "users": d.get("users"), "attempt": d.get("attempt"), "method": d.get("method"),
            "alarms": [*d.get("monitor_alarms", []), *d.get("candidate_eval_alarms", [])],
            "canary_outcome": canary.get("outcome"), "canary_looks": canary.get("looks"),
            "reasons": list(r["reasons"]), "rerun": rerun_links(r),
        })  # fmt: skip
    return out[::-1]


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def canary_course(record: dict[str, Any]) -> dict[str, Any] | None:
    """A canary's looks: for each, the verdict, the live reward's difference and its bounds,
    and the margin the lower bound must clear (-margin) for a rollout.

    >>> rec = {"checkpoint_id": "c1", "status": "canary", "evals": {"canary": {
    ...     "experiment": "canary-c1", "percent": 10, "looks": 1, "outcome": None,
    ...     "config": {"margin": 0.1}, "verdicts": [{"look": 1, "verdict": "wait",
    ...     "at": "t1", "reasons": ["thin"], "srm": {"observed": [90, 10]},
    ...     "comparisons": [{"metric": "mean_reward", "difference": 0.02, "low": -0.3,
    ...                      "high": 0.4, "users": 100, "informative": True}]}]}}}
    >>> course = canary_course(rec)
    >>> course["margin"], course["looks"][0]["low"], course["looks"][0]["clears_margin"]
    (0.1, -0.3, False)
    """
    stage = record["evals"].get("canary")
    if not stage:
        return None
    margin = float((stage.get("config") or {}).get("margin", 0.1))
    looks = []
    for v in stage.get("verdicts", []):
        found = (c for c in v.get("comparisons", []) if c.get("metric") == REWARD)
        reward: dict[str, Any] = next(found, {})
        low, high = _finite(reward.get("low")), _finite(reward.get("high"))
        looks.append({
            "look": v.get("look"), "at": v.get("at"), "verdict": v.get("verdict"),
            "difference": _finite(reward.get("difference")), "low": low, "high": high,
            "users": reward.get("users"), "informative": reward.get("informative"),
            "srm": (v.get("srm") or {}).get("observed"),
            "clears_margin": low is not None and low > -margin,
            "margin_to_bound": None if low is None else low + margin,
            "reasons": list(v.get("reasons", [])),
        })  # fmt: skip
    return {"checkpoint_id": record["checkpoint_id"], "status": record["status"],
            "experiment": stage.get("experiment"), "percent": stage.get("percent"),
            "margin": margin, "outcome": stage.get("outcome"), "looks": looks}  # fmt: skip


def canaries(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each canary's course, the newest first."""
    courses = [canary_course(r) for r in records]
    return [c for c in courses if c is not None][::-1]


def mismatch(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The train/serve mismatch KL of each batch a round checked, per token (k1 and k3), with
    whether it was quarantined.

    >>> mismatch([{"checkpoint_id": "c1", "evals": {"mismatch": {"b1": {"k1": 0.001,
    ...     "k3": 0.0004, "tokens": 90, "rollouts": 8, "reason": None}}}}])
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'checkpoint_id': 'c1', 'batch': 'b1', 'k1': 0.001, 'k3': 0.0004, 'tokens': 90,
      'rollouts': 8, 'quarantined': None}]
    """
    out = []
    for r in records:
        for batch, f in (r["evals"].get("mismatch") or {}).items():
            out.append({"checkpoint_id": r["checkpoint_id"], "batch": batch,
                        "k1": _finite(f.get("k1")), "k3": _finite(f.get("k3")),
                        "tokens": f.get("tokens"), "rollouts": f.get("rollouts"),
                        "quarantined": f.get("reason")})  # fmt: skip
    return out


def monitor_alarms(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reward-hacking monitors' alarms each gate decision recorded (the served
    checkpoint's behaviour rates against its parent's), and the candidate evals' alarms."""
    out = []
    for r in records:
        for message in r["evals"].get("alarms", []) or []:
            out.append({"checkpoint_id": r["checkpoint_id"], "source": "monitors",
                        "alarm": message})  # fmt: skip
        for test in r["evals"].get("candidate_evals", []) or []:
            if test.get("alarm"):
                out.append({"checkpoint_id": r["checkpoint_id"], "source": "candidate evals",
                            "alarm": test.get("message") or test.get("metric")})  # fmt: skip
    return out
