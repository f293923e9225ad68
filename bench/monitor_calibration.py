#!/usr/bin/env python3
"""How often the behaviour monitors (``rewards.monitors``) alarm on a checkpoint that moved
nothing, beside their stated alpha, and how often they catch a move, on simulated traffic
(``stats.clustered_traffic``) that is not a textbook's: per-user tastes, heavy-tailed activity,
censoring with privacy mode, repeated looks as users arrive, thin arms at the floors.

False alarms are measured with every threshold at 0 (only the test stands between noise and an
alarm): each rate's one-sided test alone (the worst of the four rates is shown) and any alarm
across them after Holm. Power uses the default thresholds. "before" rows undo one safeguard of
this version to show what it holds off.

Figures to stdout and ``bench/out/monitor_calibration.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import numpy as np  # noqa: E402

import stats.cluster_ratio as cluster_ratio_module  # noqa: E402
from rewards.monitors import (  # noqa: E402
    CheckpointRates,
    MetricThreshold,
    MonitorThresholds,
    assess,
)
from stats.cluster_ratio import one_sided_move  # noqa: E402
from stats.clustered_traffic import Side, Traffic, draw_side, side_ratios  # noqa: E402

ALPHA = 0.05
BAD_WAY = {"tool_call_rate": -1, "tool_calls_per_interaction": +1, "edit_rate": -1,
           "censored_share": +1}  # fmt: skip
ZERO = MonitorThresholds(**{m: MetricThreshold(relative=0, absolute=0, direction="down" if w < 0
                            else "up") for m, w in BAD_WAY.items()})  # fmt: skip
NULL_WORLDS = {  # name: traffic of both arms
    "i.i.d.: 200 users of one interaction": Traffic(users=200, sizes="equal", mean_size=1,
                                                    calls_shape=1e6, edit_spread=0.0),
    "per-user tastes: 40 users x 10, strong correlation": Traffic(
        users=40, sizes="equal", mean_size=10, calls_shape=0.5, edit_spread=0.6),
    "heavy users: 60, Lomax 1.3 sizes, heavy call more": Traffic(
        users=60, sizes="pareto", calls_shape=1.0, edit_spread=0.5, activity_tilt=0.5),
    "censored: 30 % privacy-mode users, 10 % no outcome, 8 orgs": Traffic(
        mean_size=10, calls_shape=1.0, edit_spread=0.5, privacy=0.3, no_outcome=0.1, orgs=8),
    "rare: 0.5 % censored, 100 users x 10": Traffic(users=100, mean_size=10, no_outcome=0.005),
    "thin: 5 users x 4 (the floors)": Traffic(users=5, sizes="equal", mean_size=4,
                                              calls_shape=1.0),
    "thin: 6 users, geometric sizes of mean 4": Traffic(users=6, mean_size=4, calls_shape=1.0),
}  # fmt: skip


def rates(name: str, side: Side) -> CheckpointRates:
    ratios = side_ratios(side)
    return CheckpointRates(name, round(ratios["edit_rate"].total), 0, ratios)


def alarmed(child: Side, parent: Side, thresholds: MonitorThresholds, look: int | None = None,
            metric: str | None = None) -> bool:  # fmt: skip
    verdicts = assess(rates("child", child), rates("parent", parent), thresholds, look)
    return any(v.status == "alarm" and metric in (None, v.metric) for v in verdicts)


def null_rates(traffic: Traffic, trials: int, seed: int) -> tuple[float, float]:
    """The worst rate's one-sided false alarms alone, and any alarm after Holm."""
    rng, hits, any_hits = np.random.default_rng(seed), dict.fromkeys(BAD_WAY, 0), 0
    for _ in range(trials):
        child, parent = draw_side(rng, traffic), draw_side(rng, traffic)
        a, b = side_ratios(child), side_ratios(parent)
        for metric, way in BAD_WAY.items():
            hits[metric] += one_sided_move(b[metric], a[metric], way).p_value < ALPHA
        any_hits += alarmed(child, parent, ZERO)
    return max(hits.values()) / trials, any_hits / trials


@contextmanager
def bell_mccaffrey_only():
    """Before: the degrees of freedom of Bell-McCaffrey alone (no ``alike_df``)."""
    saved = cluster_ratio_module.alike_df
    cluster_ratio_module.alike_df = lambda share: math.inf
    try:
        yield
    finally:
        cluster_ratio_module.alike_df = saved


def cell(rate: float, trials: int) -> str:
    return f"{rate:.3f} +- {math.sqrt(max(rate * (1 - rate), 1e-9) / trials):.3f}"


def null_rows(trials: int) -> list[list[str]]:
    worlds = [(name, traffic, "") for name, traffic in NULL_WORLDS.items()]
    worlds.append(("censored, records without org_id: by session (before)",
                   NULL_WORLDS["censored: 30 % privacy-mode users, 10 % no outcome, 8 orgs"]
                   .moved(orgs=0), ""))  # fmt: skip
    rows = []
    for seed, (name, traffic, _) in enumerate(worlds):
        worst, any_alarm = null_rates(traffic, trials, 100 + seed)
        rows.append([name, f"{ALPHA}", cell(worst, trials), cell(any_alarm, trials)])
    with bell_mccaffrey_only():
        heavy = NULL_WORLDS["heavy users: 60, Lomax 1.3 sizes, heavy call more"]
        worst, any_alarm = null_rates(heavy, trials, 102)
    rows.append(["heavy users, Bell-McCaffrey df alone (before)", f"{ALPHA}",
                 cell(worst, trials), cell(any_alarm, trials)])  # fmt: skip
    return rows


def look_rows(trials: int, looks: int = 5, step: int = 20) -> list[list[str]]:
    """Null arms whose users arrive ``step`` a look; an alarm at any of ``looks`` looks."""
    traffic = Traffic(users=step * looks, calls_shape=1.0, edit_spread=0.5, no_outcome=0.05)
    rows = []
    for seed, spend in enumerate((False, True)):
        rng, ever, each = np.random.default_rng(200 + seed), 0, np.zeros(looks)
        for _ in range(trials):
            child, parent = draw_side(rng, traffic), draw_side(rng, traffic)
            hits = [alarmed(cut(child, step * k), cut(parent, step * k), ZERO,
                            k if spend else None) for k in range(1, looks + 1)]  # fmt: skip
            ever += any(hits)
            each += hits
        label = "look=k: alpha 6/(pi^2 k^2)" if spend else "each look at alpha (per look)"
        rows.append([f"{looks} looks, {step} users arrive a look, {label}",
                     f"{ALPHA} {'overall' if spend else 'per look'}",
                     f"worst look {cell(float(each.max() / trials), trials)}",
                     f"any look {cell(ever / trials, trials)}"])  # fmt: skip
    return rows


def cut(side: Side, users: int) -> Side:
    keep = side.user < users
    return Side(*(getattr(side, f)[keep] for f in Side.__dataclass_fields__))


def power(before: Traffic, after: Traffic, trials: int, seed: int) -> tuple[float, float]:
    """The tool-call share's alarm rate (default thresholds), and the share of null verdicts
    that call it ``ok`` at this size."""
    rng, fired, ok = np.random.default_rng(seed), 0, 0
    for _ in range(trials):
        fired += alarmed(draw_side(rng, after), draw_side(rng, before), MonitorThresholds(),
                         metric="tool_call_rate")  # fmt: skip
        verdicts = assess(rates("c", draw_side(rng, before)), rates("p", draw_side(rng, before)),
                          MonitorThresholds())  # fmt: skip
        ok += any(v.metric == "tool_call_rate" and v.status == "ok" for v in verdicts)
    return fired / trials, ok / trials


def power_rows(trials: int) -> list[list[str]]:
    """The agent world's fall (1.30 -> 0.41 calls a run, share with a call 0.63 -> 0.29) at
    128 runs a side, and a fall of 1.5 times the share's threshold (0.63 -> 0.40: calls 0.57)
    among heavy users, where "ok" promises power 0.8."""
    agent = Traffic(calls=1.3, calls_shape=2.0, edit_spread=0.0)
    worlds: list[tuple[str, Traffic, float]] = [
        ("agent fall, 128 users x 1", agent.moved(users=128, sizes="equal", mean_size=1), 0.41),
        ("agent fall, 32 users x 4", agent.moved(users=32, sizes="equal", mean_size=4), 0.41),
        ("agent fall, 32 Lomax users, mean 4", agent.moved(users=32, sizes="pareto",
                                                            mean_size=4), 0.41),
        ("sized fall, 128 Lomax users, mean 4", agent.moved(users=128, sizes="pareto",
                                                             mean_size=4), 0.573),
        ("sized fall, 256 Lomax users, mean 4", agent.moved(users=256, sizes="pareto",
                                                             mean_size=4), 0.573),
    ]  # fmt: skip
    rows = []
    for seed, (name, traffic, after) in enumerate(worlds):
        fired, ok = power(traffic, traffic.moved(calls=after), trials, 300 + seed)
        rows.append([name, cell(fired, trials), f"{ok:.2f}"])
    return rows


def timed(label: str, build: Callable[[int], list[list[str]]], trials: int) -> list[list[str]]:
    print(f"{label}: {trials} trials a world ...", file=sys.stderr, flush=True)
    return build(trials)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=2000)
    args = parser.parse_args()
    nulls = timed("null worlds", null_rows, args.trials)
    looks = timed("repeated looks", look_rows, args.trials // 4)
    powers = timed("power", power_rows, args.trials // 4)
    print("+- is one Monte-Carlo standard error; thresholds at 0 for the false alarms")
    print(format_table(["null world", "alpha", "worst rate alone", "any rate (Holm)"],
                       nulls + looks))  # fmt: skip
    print(format_table(["tool-call share falls", "alarms (default thresholds)",
                        "null verdicts 'ok'"], powers))  # fmt: skip
    write_results("monitor_calibration", {"machine": machine(), "trials": args.trials,
                                          "null": nulls + looks, "power": powers})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
