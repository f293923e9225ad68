"""The warehouse's part of the page, pure: reward by checkpoint over time with intervals, the
running experiment's arms and their observed shares of users, and its three headline metrics.

The reward interval of a bucket is the normal 95 % one of the mean of its scored interactions,
``mean +- 1.96 sd / sqrt(n)``: a picture of how sure each point is, not a decision (the gate
and the canary decide with their own, clustered and anytime-valid, bounds). A bucket of one
interaction has no interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Z95 = 1.959963984540054


def interval(mean: float, sd: float | None, n: int) -> tuple[float | None, float | None]:
    """
    >>> [round(x, 4) for x in interval(1.0, 2.0, 16)]
    [0.02, 1.98]
    >>> interval(1.0, None, 1)
    (None, None)
    """
    if n < 2 or sd is None or not math.isfinite(sd):
        return None, None
    half = Z95 * sd / math.sqrt(n)
    return mean - half, mean + half


def reward_series(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One series per checkpoint, in order of first appearance: each bucket's start (epoch
    seconds), mean reward, interval and count.

    >>> reward_series([{"checkpoint_id": "c0", "bucket": 60, "n": 4, "mean": 0.5, "sd": 0.0}])
    [{'checkpoint_id': 'c0', 'points': [{'t': 60, 'mean': 0.5, 'low': 0.5, 'high': 0.5, 'n': 4}]}]
    """
    series: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        low, high = interval(float(r["mean"]), r["sd"], int(r["n"]))
        series.setdefault(r["checkpoint_id"], []).append(
            {"t": int(r["bucket"]), "mean": float(r["mean"]), "low": low, "high": high,
             "n": int(r["n"])})  # fmt: skip
    return [{"checkpoint_id": c, "points": p} for c, p in series.items()]


def arm_shares(arms: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each arm's users and interactions, and its observed share of users in percent.

    >>> arm_shares([{"arm": "parent", "users": 90, "interactions": 200},
    ...             {"arm": "canary", "users": 10, "interactions": 20}])[1]["percent"]
    10.0
    """
    total = sum(int(a["users"]) for a in arms)
    return [{**a, "percent": 100.0 * int(a["users"]) / total if total else None} for a in arms]


CONTROLS = ("control", "parent")  # the control arm's names: rtrl run's A/B, a canary's


def seed_metrics(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The A/B mart's rows of the three headline metrics, each change with its fixed-sample
    and anytime-valid 95 % intervals (as ``rtrl report ab`` prints them), each arm against the
    control where the experiment has one (the mart compares every pair of arms both ways).

    >>> rows = [{"arm": "canary", "control_arm": "parent"},
    ...         {"arm": "parent", "control_arm": "canary"}]
    >>> [r["arm"] for r in seed_metrics(rows)]
    ['canary']
    """
    keep = ("arm", "control_arm", "metric", "label", "control", "value", "relative_change",
            "ci_low", "ci_high", "seq_ci_low", "seq_ci_high", "p_value", "n_users")  # fmt: skip
    against = [r for r in rows if r.get("control_arm") in CONTROLS]
    return [{k: r.get(k) for k in keep} for r in against or rows]
