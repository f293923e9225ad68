#!/usr/bin/env python3
"""The gate per organisation: each organisation's promotion rate, judged on its own users'
evidence, beside one decision on everyone's evidence taken for all, in the worlds of
``tests/release/org_worlds.py`` (the test ``tests/release/test_org_gate.py`` holds the same).

* mixed: two large organisations (240 and 120 held-out users a round) a candidate truly suits
  (gain +0.06), and a small one (20 users) it truly does not (gain -0.06);
* null: four organisations of 240, 120, 60 and 20 users, every candidate truly equal: each
  promotion is a false one, and their sum is the expected number of false promotions a round;
* accumulated: a 20-user organisation over ``--looks`` looks, each on every round's held-out
  users so far at its attempt's level (``release.gate.attempt_level``): its power by look, and
  its false promotions by look, with and without spending alpha look by look.

Each decision is the gate's (``release.gate.decide`` on ``release.offpolicy_bound``'s CR2 bound
with the Bell-McCaffrey t) at a one-sided 5 %; "limit" is 5 % plus three Monte-Carlo standard
errors. Figures to stdout and ``bench/out/org_gate.json``.

    python bench/org_gate.py [--trials 2000]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from tests.release.org_worlds import (  # noqa: E402
    MIXED,
    NULL,
    SMALL,
    SMALL_NULL,
    Org,
    accumulated_rates,
    promotion_rates,
)

ALPHA = 0.05


def _rows(orgs: tuple[Org, ...], own: list[float], pooled: list[float]) -> list[list]:
    return [[o.name, o.users, f"{o.true_gain:+.3f}", f"{a:.3f}", f"{b:.3f}"]
            for o, a, b in zip(orgs, own, pooled, strict=True)]  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--looks", type=int, default=8, help="looks of the accumulating course")
    args = p.parse_args()
    started = time.monotonic()
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.trials)
    figures: dict = {"trials": args.trials, "alpha": ALPHA, "limit": ALPHA + 3 * se,
                     "machine": machine()}  # fmt: skip
    header = ["organisation", "users", "true gain", "promoted, own evidence",
              "promoted, pooled decision"]  # fmt: skip
    for name, orgs in (("mixed", MIXED), ("null", NULL)):
        own = promotion_rates(orgs, args.trials, args.seed)
        pooled = promotion_rates(orgs, args.trials, args.seed, pooled=True)
        false_own = sum(r for o, r in zip(orgs, own, strict=True) if o.true_gain <= 1e-12)
        false_pooled = sum(r for o, r in zip(orgs, pooled, strict=True) if o.true_gain <= 1e-12)
        print(f"\n{name} world, {args.trials} rounds (alpha {ALPHA}, limit "
              f"{figures['limit']:.3f}):")  # fmt: skip
        print(format_table(header, _rows(orgs, own, pooled)))
        print(f"expected false promotions a round, across organisations: {false_own:.3f} "
              f"judged on their own evidence, {false_pooled:.3f} pooled")  # fmt: skip
        figures[name] = {
            "orgs": [
                {
                    "name": o.name,
                    "users": o.users,
                    "true_gain": o.true_gain,
                    "promoted_own": a,
                    "promoted_pooled": b,
                }
                for o, a, b in zip(orgs, own, pooled, strict=True)
            ],  # fmt: skip
            "expected_false_own": false_own,
            "expected_false_pooled": false_pooled,
        }
    looks = args.looks
    course = {
        "power": accumulated_rates(SMALL, looks, args.trials, args.seed),
        "false": accumulated_rates(SMALL_NULL, looks, args.trials, args.seed + 1),
        "false_without_spending": accumulated_rates(
            SMALL_NULL, looks, args.trials, args.seed + 1, spend=False
        ),  # fmt: skip
    }
    print(f"\na {SMALL.users}-user organisation over {looks} looks, each on every round's "
          f"held-out users so far (promoted by look k, {args.trials} courses):")  # fmt: skip
    print(format_table(["look", "gain +0.06: promoted", "truly equal: promoted",
                        "truly equal, full level every look"],
                       [[k + 1, f"{course['power'][k]:.3f}", f"{course['false'][k]:.3f}",
                         f"{course['false_without_spending'][k]:.3f}"]
                        for k in range(looks)]))  # fmt: skip
    figures["accumulated"] = {"users": SMALL.users, "looks": looks,
                              "gain": SMALL.true_gain, **course}  # fmt: skip
    figures["wall_s"] = time.monotonic() - started
    print(f"\n{figures['wall_s']:.0f} s; figures: {write_results('org_gate', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
