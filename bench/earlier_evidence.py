#!/usr/bin/env python3
"""The gate on a line's earlier rounds (``rtrl train --evidence-depth``): how often a candidate is
promoted when it is judged on the parent's own round alone, on the grandparent's round too with
both arms off-policy (the parent's value estimated from its own weights), and on both rounds
with the grandparent's rewards read as the parent's (what the both-arms estimate replaces), in
the lineages of ``tests/release/lineage_worlds.py`` (``tests/release/test_offpolicy_parent.py``
holds the same):

* null: a candidate exactly as good as its parent, which is truly better than the grandparent
  (every promotion is a false one), with 20-30 users a round, and with 10-20 users of strong
  tastes and steep activity;
* power: a candidate truly worth +0.05 over its parent, with 8-12 users a round (a small
  organisation), the parent one step from the grandparent.

Each decision is the gate's (``release.gate.decide`` on the centred CR2 bound) at a one-sided
5 %; "limit" is 5 % plus three Monte-Carlo standard errors. Figures to stdout and
``bench/out/earlier_evidence.json``.

    python bench/earlier_evidence.py [--trials 2000]
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

from tests.release.lineage_worlds import (  # noqa: E402
    BETTER,
    EQUAL,
    GRANDPARENT,
    NEAR_GRANDPARENT,
    NEAR_PARENT,
    PARENT,
    Lineage,
    decisions,
)

ALPHA = 0.05
WORLDS = {
    "null, 20-30 users": Lineage(GRANDPARENT, PARENT, EQUAL),
    "null, 10-20 users, strong tastes, steep activity": Lineage(
        GRANDPARENT, PARENT, EQUAL, users=(10, 20), interactions=400, taste_sd=0.45, zipf=1.5
    ),
    "gain +0.05, 8-12 users": Lineage(
        NEAR_GRANDPARENT, NEAR_PARENT, BETTER, users=(8, 12), interactions=40
    ),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    started = time.monotonic()
    limit = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / args.trials)
    figures: dict = {"trials": args.trials, "alpha": ALPHA, "limit": limit, "machine": machine()}
    rows = []
    for n, (name, lineage) in enumerate(WORLDS.items()):
        rates = decisions(lineage, args.trials, args.seed + n)
        figures[name] = {"true_gain": lineage.true_gain(), **rates}
        alone, both, naive = (rates[k] for k in ("parent's round", "both arms", "naive"))
        rows.append([name, f"{lineage.true_gain():+.3f}", f"{alone:.3f}", f"{both:.3f}",
                     f"{naive:.3f}"])  # fmt: skip
    print(f"promoted in {args.trials} draws each (one-sided {ALPHA}; a null world's limit "
          f"{limit:.3f}):")  # fmt: skip
    print(format_table(["world", "true gain", "parent's round alone",
                        "both rounds, both arms off-policy",
                        "both rounds, grandparent's rewards as the parent's"], rows))  # fmt: skip
    figures["wall_s"] = time.monotonic() - started
    print(f"\n{figures['wall_s']:.0f} s; figures: {write_results('earlier_evidence', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
