#!/usr/bin/env python3
"""What the agent world's closing A/B gains by looking at its half: the users it plays, its
error rate and its power, beside the fixed-size design it replaced, on the same simulated users.

Each world draws closing A/Bs of users split by a fair coin, two runs each on tasks of unequal
difficulty (``tests.support.closing_ab``), read by the A/B's own estimator as `rtrl run` reads
them: the fixed design plays all its users (the first 283 of the same simulated users) and tests
at 1.96; the group-sequential one
(``rtrl.worlds.agent_ab.play_in_looks``) looks at the half under O'Brien-Fleming's bounds and
stops there when it is sure. The worlds: no change (the error rate), the change the A/B is sized
for (0.375 to 0.525), and the rates the five seeds' closing A/Bs measured (``bench/RESULTS.md``,
"The rebuilt agent world, seed by seed"). The A/B's minutes scale with its users: the seeds'
took 17-24 minutes for 283.

    python bench/ab_group_sequential.py [--tests 1000] [--spread 0.02]

Figures to stdout and ``bench/out/ab_group_sequential.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import numpy as np  # noqa: E402

from rtrl.worlds.agent_world import AgentWorldSettings  # noqa: E402
from stats.power import runs_per_arm  # noqa: E402
from tests.support.closing_ab import RUNS_PER_USER, Arms, simulated_runs, staged  # noqa: E402

Z975 = 1.959963984540054
WORLDS = {
    "no change": (0.375, 0.375),
    "as sized": (0.375, 0.525),
    "seed 1": (0.552, 0.650),
    "seed 3": (0.563, 0.632),
    "seed 4": (0.511, 0.734),
    "seed 5": (0.602, 0.777),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000, help="simulated A/Bs a world")
    parser.add_argument("--spread", type=float, default=0.02,
                        help="how unlike users are (0: alike; the agent world's are)")  # fmt: skip
    args = parser.parse_args()
    settings = AgentWorldSettings()
    fixed_users = runs_per_arm(settings.ab_base_rate, settings.ab_base_rate + settings.ab_effect)
    looked_users, bounds = settings.ab_users, settings.ab_bounds
    table, results = [], {}
    for n, (name, (control, treatment)) in enumerate(WORLDS.items()):
        arms = Arms(control, treatment, args.spread)
        rng, fixed, looked = np.random.default_rng(100 + n), [], []
        for _ in range(args.tests):  # both designs on the same users, the fixed on its first
            runs = simulated_runs(rng, arms, looked_users)
            fixed.append(staged(runs[: RUNS_PER_USER * fixed_users], fixed_users, (Z975,)))
            looked.append(staged(runs, looked_users, bounds))
        figures = {
            "fixed_rejects": sum(x.crossed for x in fixed) / args.tests,
            "looked_rejects": sum(x.crossed for x in looked) / args.tests,
            "stopped_at_half": sum(x.look == 1 and x.crossed for x in looked) / args.tests,
            "looked_mean_users": sum(x.users for x in looked) / args.tests,
            "fixed_users": fixed_users,
        }
        results[name] = {"control": control, "treatment": treatment, **figures}
        table.append([name, f"{control:.3f} -> {treatment:.3f}", f"{figures['fixed_rejects']:.3f}",
                     f"{figures['looked_rejects']:.3f}", f"{figures['stopped_at_half']:.2f}",
                     f"{figures['looked_mean_users']:.0f} of {looked_users}",
                     f"{figures['looked_mean_users'] / fixed_users:.2f}"])  # fmt: skip
    print(f"{args.tests} simulated closing A/Bs a world, users' spread {args.spread}; fixed: "
          f"{fixed_users} users at 1.96; looked: {looked_users} users, bounds "
          f"{', '.join(f'{b:.3f}' for b in bounds)}")  # fmt: skip
    header = ["world", "tasks solved", "fixed: rejects", "looked: rejects",
              "stopped at the half", "users played (looked)", "of fixed"]  # fmt: skip
    print(format_table(header, table))
    write_results("ab_group_sequential", {"machine": machine(), "tests": args.tests,
                                          "spread": args.spread, "bounds": list(bounds),
                                          "worlds": results})  # fmt: skip


if __name__ == "__main__":
    main()
