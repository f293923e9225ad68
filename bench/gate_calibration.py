#!/usr/bin/env python3
"""The offline gate's error rates and power on simulated serving logs where the truth is known
(``tests/release/worlds.py``, the worlds the tests draw from): every world's promotion rate
beside its nominal level, with its Monte-Carlo standard error, over ``--trials`` seeded trials of
the whole gate (``release.gate.decide`` on ``release.offpolicy_bound``'s estimate).

* null worlds (30-40 users, Zipf-like activity, per-user taste with mean 0, and one of 6-8
  users): the false-promotion rate at a first attempt's level and at the full 95 %, of the
  gate's bound (CR2 and a Bell-McCaffrey t) beside the percentile user bootstrap it replaced,
  and what resampling interactions instead of users would give;
* the collapse world (a candidate piling onto a disliked rare completion): its promotion rate,
  and the mean gain the old truncated self-normalised estimate saw;
* retries: eight attempts on one parent with the same held-out users, alpha split across
  attempts (the gate) and alpha each time (what it prevents): any promotion within 1, 4, 8;
* power worlds: the promotion rate of a candidate with a real gain at a first attempt's level,
  of both bounds;
* strong tastes: 10-30 users, steep activity, each outright liking or disliking the
  candidate's favourite, the gate's degrees of freedom beside the Bell-McCaffrey ones;
* censored worlds (some outcomes never land, reward null): a candidate drifting toward
  always-scored worse completions, one making its outcomes unscorable, and a real gain, each
  with censored interactions kept (the gate) and dropped (what it did before).

``--worlds censored`` and ``--worlds strong`` run those worlds alone.

Figures to stdout and ``bench/out/gate_calibration.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import numpy as np  # noqa: E402

from release.gate import attempt_level  # noqa: E402
from release.offpolicy_bound import (  # noqa: E402
    BM_CENTRED_METHOD,
    BM_METHOD,
    CENTRED_METHOD,
    PERCENTILE_METHOD,
)
from tests.release.worlds import (  # noqa: E402
    CENSORED_DRIFT,
    CENSORED_GAIN,
    CENSORED_HACK,
    COLLAPSE,
    FEW_USERS,
    NULL_WORLDS,
    POWER_WORLDS,
    RETRY_WORLD,
    STRONG_TASTES,
    World,
    promoted,
    promotion_rate,
    retry_candidate,
)

FIRST = attempt_level(0.95, 1)


def _se(rate: float, trials: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / trials)


def _row(what: str, world: World | None, nominal: str, rate: float, trials: int) -> list:
    gain = "" if world is None else f"{world.true_gain():+.3f}"
    return [what, gain, nominal, f"{rate:.3f}", f"{_se(rate, trials):.3f}"]


def _retries(trials: int, resamples: int, spend: bool) -> list[float]:
    """Share of parents with a promotion within 1..8 attempts."""
    rng = np.random.default_rng(3)
    first = np.zeros(9)
    for trial in range(trials):
        population = RETRY_WORLD.population(rng)
        data = None
        for attempt in range(1, 9):
            new = RETRY_WORLD.draw(rng, population)
            data = new if data is None else data + new
            level = attempt_level(0.95, attempt) if spend else 0.95
            estimate = data.scored_by(retry_candidate(attempt)).estimate(
                resamples=resamples, seed=trial * 8 + attempt, level=level
            )
            if promoted(estimate):
                first[attempt] += 1
                break
    return list(np.cumsum(first) / trials)


def _strong_tastes(n: int) -> list[list]:
    """The gate's degrees of freedom (Imbens-Kolesar at the within-user correlation's upper
    bound) beside Bell-McCaffrey's, where few heavy users' strong tastes carry the data."""
    rows = []
    for method, label in ((None, "clipped"), (CENTRED_METHOD, "centred"),
                          (BM_METHOD, "clipped, Bell-McCaffrey df (before)"),
                          (BM_CENTRED_METHOD, "centred, Bell-McCaffrey df (before)")):  # fmt: skip
        kwargs = {} if method is None else {"method": method}
        rate = promotion_rate(STRONG_TASTES, n, 9, 0, level=0.95, **kwargs)
        rows.append(_row(f"{STRONG_TASTES.name}: {label}", STRONG_TASTES, "0.050", rate, n))
        print(rows[-1], flush=True)
    return rows


def _censored(n: int, b: int) -> list[list]:
    rows = []
    for world in (CENSORED_DRIFT, CENSORED_HACK, CENSORED_GAIN):
        nominal = f"{1 - FIRST:.3f}" if world.true_gain() <= 0 else "power"
        for label, options in (
            (f"{world.name} (attempt 1)", {}),
            ("… centred, full support", {"method": CENTRED_METHOD}),
            ("… censored dropped (before)", {"scored_only": True}),
        ):
            rate = promotion_rate(world, n, 7, b, level=FIRST, **options)
            rows.append(_row(label, world, nominal, rate, n))
        print(*rows[-3:], sep="\n", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--worlds", choices=["all", "censored", "strong"], default="all")
    args = parser.parse_args()
    n, b = args.trials, args.resamples
    header = ["world", "true gain", "nominal", "promoted", "MC s.e."]
    if args.worlds in ("censored", "strong"):
        rows = _censored(n, b) if args.worlds == "censored" else _strong_tastes(n)
        print(format_table(header, rows))
        write_results(f"gate_calibration_{args.worlds}", {"machine": machine(), "trials": n,
                                                          "rows": rows})  # fmt: skip
        return 0
    rows = _strong_tastes(n)
    for world in (*NULL_WORLDS, FEW_USERS):
        for level, label in ((FIRST, "attempt 1"), (0.95, "alpha 0.05")):
            rate = promotion_rate(world, n, 1, b, level=level)
            rows.append(_row(f"{world.name} ({label})", world, f"{1 - level:.3f}", rate, n))
            rate = promotion_rate(world, n, 1, b, level=level, method=PERCENTILE_METHOD)
            rows.append(_row(f"… percentile bootstrap ({label})", world, f"{1 - level:.3f}", rate,
                             n))  # fmt: skip
            rate = promotion_rate(world, n, 1, b, level=level, method=CENTRED_METHOD)
            rows.append(_row(f"… centred, full support ({label})", world, f"{1 - level:.3f}",
                             rate, n))  # fmt: skip
        rate = promotion_rate(world, n, 1, b, level=0.95, by_interaction=True)
        rows.append(_row(f"{world.name} (by interaction)", world, "0.050", rate, n))
        print(*rows[-7:], sep="\n", flush=True)
    for label, options in (
        ("collapse (attempt 1)", {}),
        ("… centred, full support", {"method": CENTRED_METHOD}),
    ):
        rate = promotion_rate(COLLAPSE, n, 2, b, level=FIRST, **options)
        rows.append(_row(label, COLLAPSE, f"{1 - FIRST:.3f}", rate, n))
    for spend, label in ((True, "alpha split"), (False, "alpha each time")):
        within = _retries(n, b, spend)
        for k in (1, 4, 8):
            rows.append(_row(f"retries, {label}, within {k}", None, "0.050", within[k], n))
        print(*rows[-3:], sep="\n", flush=True)
    for world in POWER_WORLDS:
        rate = promotion_rate(world, n, 4, b, level=FIRST)
        rows.append(_row(f"power: {world.name} (attempt 1)", world, f"{1 - FIRST:.3f}", rate, n))
        rate = promotion_rate(world, n, 4, b, level=FIRST, method=PERCENTILE_METHOD)
        rows.append(_row("… percentile bootstrap", world, f"{1 - FIRST:.3f}", rate, n))
        rate = promotion_rate(world, n, 4, b, level=FIRST, method=CENTRED_METHOD)
        rows.append(_row("… centred, full support", world, f"{1 - FIRST:.3f}", rate, n))
    rows += _censored(n, b)
    print(format_table(header, rows))
    write_results("gate_calibration", {"machine": machine(), "trials": n, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
