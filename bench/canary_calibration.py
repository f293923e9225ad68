#!/usr/bin/env python3
"""How often the canary's verdict is wrong, measured on simulated live A/B data beside its
nominal error rates: rollbacks of a candidate that is no different (nominal ``alpha``), sample-
ratio-mismatch alarms on fair splits (nominal 0.001), and how often a truly worse or better
candidate gets the right verdict (power). Users of 1 to 4 interactions, reward +1 accepted / -1
not, ``--users`` users split ``--percent`` % to the canary.

Figures to stdout and ``bench/out/canary.json``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from release.canary import CanaryConfig, UserSums, arm_of, judge, sample_ratio  # noqa: E402
from rewards.monitors import MonitorThresholds  # noqa: E402


def users(rng: random.Random, n: int, accept: float, invalid: float) -> list[UserSums]:
    out = []
    for _ in range(n):
        k = rng.randint(1, 4)
        accepted = sum(rng.random() < accept for _ in range(k))
        bad = sum(rng.random() < invalid for _ in range(k))
        out.append(UserSums(k, k, float(2 * accepted - k), {"invalid_tool_call_rate": bad}))
    return out


def rate(trials: int, seed: int, config: CanaryConfig, total: int, accept: float,
         invalid: float, verdict: str) -> float:  # fmt: skip
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        n_canary = sum(rng.random() < config.percent / 100 for _ in range(total))
        parent = arm_of(users(rng, total - n_canary, 0.5, 0.1))
        canary = arm_of(users(rng, n_canary, accept, invalid))
        hits += judge(parent, canary, config, MonitorThresholds(), 1).verdict == verdict
    return hits / trials


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--percent", type=float, default=20)
    args = parser.parse_args()
    config = CanaryConfig(percent=args.percent, min_interactions=500)
    t, n = args.trials, args.users
    rng = random.Random(9)
    srm = sum(
        sample_ratio(n - (c := sum(rng.random() < args.percent / 100 for _ in range(n))), c,
                     args.percent, config.srm_alpha).mismatch
        for _ in range(t)
    ) / t  # fmt: skip
    rows = [
        ["rollback, candidate no different", f"{config.alpha:.3f}",
         f"{rate(t, 1, config, n, 0.5, 0.1, 'rollback'):.3f}"],
        ["SRM alarm, fair split", f"{config.srm_alpha:.3f}", f"{srm:.4f}"],
        ["rollback, acceptance 0.50 -> 0.44 (power)", "-",
         f"{rate(t, 2, config, n, 0.44, 0.1, 'rollback'):.3f}"],
        ["rollback, invalid calls 0.10 -> 0.20 (power)", "-",
         f"{rate(t, 3, config, n, 0.5, 0.2, 'rollback'):.3f}"],
        ["rollout, acceptance 0.50 -> 0.55", "-",
         f"{rate(t, 4, config, n, 0.55, 0.1, 'rollout'):.3f}"],
    ]  # fmt: skip
    print(f"{t} trials of {n} users, {args.percent:g} % on the canary")
    print(format_table(["verdict", "nominal", "measured"], rows))
    write_results("canary", {"machine": machine(), "rows": rows, "trials": t, "users": n})
    return 0


if __name__ == "__main__":
    sys.exit(main())
