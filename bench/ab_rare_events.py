#!/usr/bin/env python3
"""How often the A/B report's fixed-sample p-value calls a change on null data where an event is
rare and the arms thin (a kept edit in the agent world's closing A/B: 1 or 2 % of 48
interactions an arm), beside the nominal 5 % and beside the plain difference test on the same
data (``(R_t - R_c) / sqrt(Var R_t + Var R_c)``, both variances by the delta method over users).

Each trial draws two arms of ``users`` users with 1 + Poisson(1) interactions each, every
interaction an event with the same probability; a trial with no event in the control has no
relative change and is not counted. Figures to stdout and ``bench/out/ab_rare_events.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import numpy as np  # noqa: E402

from warehouse.ab import RatioSums, normal_two_sided_p, relative_change  # noqa: E402

NOMINAL = 0.05


def arm(rng: np.random.Generator, users: int, rate: float) -> RatioSums:
    x = 1 + rng.poisson(1.0, size=users).astype(float)
    y = rng.binomial(x.astype(int), rate).astype(float)
    return RatioSums(users, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum())


def world(users: int, rate: float, trials: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counted = report = peer = empty = 0
    for _ in range(trials):
        t, c = arm(rng, users, rate), arm(rng, users, rate)
        change = relative_change(t.estimate(), t.variance(), c.estimate(), c.variance())
        if change.p_value is None:
            continue
        counted += 1
        empty += t.sy == 0
        report += change.p_value < NOMINAL
        var = (t.variance() or 0.0) + (c.variance() or 0.0)
        diff = (t.estimate() or 0.0) - (c.estimate() or 0.0)
        peer += var > 0 and normal_two_sided_p(diff / math.sqrt(var)) < NOMINAL
    return {
        "users_per_arm": users,
        "rate": rate,
        "trials": counted,
        "treatment_without_event": empty / counted,
        "report_false_alarms": report / counted,
        "difference_test_false_alarms": peer / counted,
        "noise_3se": 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / counted),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args()
    rows = [
        world(users, rate, args.trials, args.seed)
        for users in (24, 100, 400)
        for rate in (0.02, 0.05, 0.2)
    ]
    header = ["users/arm", "rate", "trials", "no event (treatment)", "report", "difference test",
              "limit"]  # fmt: skip
    print(format_table(header, [
        [r["users_per_arm"], r["rate"], r["trials"], f"{r['treatment_without_event']:.3f}",
         f"{r['report_false_alarms']:.3f}", f"{r['difference_test_false_alarms']:.3f}",
         f"{NOMINAL} + {r['noise_3se']:.3f}"]
        for r in rows
    ]))  # fmt: skip
    path = write_results("ab_rare_events", {"benchmark": "ab_rare_events", "machine": machine(),
                                            "trials": args.trials, "rows": rows})  # fmt: skip
    print(f"-> {path}")


if __name__ == "__main__":
    main()
