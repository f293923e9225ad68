#!/usr/bin/env python3
"""How often the canary's verdict and the A/B report's alarms are wrong, on simulated traffic
where the truth is known, beside their nominal error rates.

Canary worlds (``release.canary_study``: users arriving over 20 looks, the last past the
deadline; default rules: 10 %, margin 0.1, alpha 0.05, 100 users per arm): the false rollout of
a canary worse by exactly the margin (nominal alpha, across all looks), the thin canaries that
must never roll out, the false rollbacks on no signal, the power worlds, a worse canary hiding
its worst interactions, and heavy users arriving first (stratified, and pooled as before). A/B
worlds: any false alarm among five null metrics with and without Holm, and over 20 refreshes with
fixed-sample and anytime-valid intervals.

Figures to stdout and ``bench/out/canary.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import numpy as np  # noqa: E402

from release.canary_config import CanaryConfig  # noqa: E402
from release.canary_study import Study, World  # noqa: E402
from stats.multiple import holm  # noqa: E402
from warehouse.ab import RatioSums, relative_change, sequential_change  # noqa: E402

# heavy users (10 %, 30 interactions) arrive first and gain +0.3, the rest lose: -margin overall
ARRIVAL = World(interactions=2.0, heavy=(0.1, 30.0, 0.3, -0.1 / 0.375 - 0.625 * 0.3 / 0.375),
                heavy_first=True)  # fmt: skip
BETTER = World(interactions=2.0, heavy=(0.2, 12.0, 0.15, 0.05), heavy_first=True)


def canary_rows(trials: int) -> list[list[str]]:
    base = CanaryConfig()
    wide = CanaryConfig(percent=20)
    thin = CanaryConfig(percent=0.25)
    arrival = CanaryConfig(strata=ARRIVAL.strata_weights())
    better = CanaryConfig(strata=BETTER.strata_weights())
    worlds = [  # (what, world, config, verdict counted, nominal)
        ("rollout, canary worse by the margin (-0.10)", World(delta=-0.1), base, "rollout",
         f"<= {base.alpha}"),
        ("rollout, ~5 canary users, bimodal, worse", World(percent=0.25, interactions=50,
         bimodal=(0.7, 0.2, -1.0), looks=5), thin, "rollout", "0"),
        ("rollout, ~200 canary users, none scored", World(censored=(0.05, 1.0), looks=5), base,
         "rollout", "0"),
        ("rollback, no signal, 6,000 users at 20 %", World(users=6000, percent=20), wide,
         "rollback", f"<= {wide.alpha + wide.guardrail_alpha:.2f} + undecided"),
        ("rollback, no signal, 2,000 users at 10 %", World(), base, "rollback",
         f"<= {base.alpha + base.guardrail_alpha:.2f} + undecided"),
        ("rollout, canary better by 0.05 (power)", World(delta=0.05), base, "rollout", "-"),
        ("rollback, canary worse by 0.30 (power)", World(delta=-0.3), base, "rollback", "-"),
        ("rollback, invalid calls 0.10 -> 0.20 (power)", World(invalid=(0.1, 0.2)), base,
         "rollback", "-"),
        ("rollout, worse (-0.12), its worst 2.5 % unscored", World(delta=-0.12, noise_sd=2.0,
         censor_worst=0.025), base, "rollout", f"<= {base.alpha}"),
        ("rollout, heavy users first, -margin overall, stratified", ARRIVAL, arrival, "rollout",
         f"<= {base.alpha}"),
        ("… pooled, no strata (before)", ARRIVAL, base, "rollout", f"<= {base.alpha}"),
        ("rollout, heavy first, better by 0.11, stratified (power)", BETTER, better, "rollout",
         "-"),
    ]  # fmt: skip
    rows = []
    for seed, (what, world, config, verdict, nominal) in enumerate(worlds):
        study = Study(world, config, trials=trials, seed=100 + seed).run()
        rate = study.rate(verdict)
        early = sum(o.verdict == "rollback" and not o.reasons[0].startswith("deadline")
                    for o in study.outcomes) / trials  # fmt: skip
        note = f"before deadline {early:.3f}" if verdict == "rollback" else ""
        rows.append([what, nominal, f"{rate:.3f} +- {study.noise(rate) / 3:.3f}", note])
    return rows


def _sums(x: np.ndarray, y: np.ndarray) -> RatioSums:
    return RatioSums(len(x), float(x.sum()), float(y.sum()), float((x * x).sum()),
                     float((y * y).sum()), float((x * y).sum()))  # fmt: skip


def _p(rng_arms: tuple, upto: int, sequential: bool) -> list[float | None]:
    (xt, yts), (xc, ycs) = rng_arms
    out = []
    for yt, yc in zip(yts, ycs, strict=True):
        st, sc = _sums(xt[:upto], yt[:upto]), _sums(xc[:upto], yc[:upto])
        args = (st.estimate(), st.variance(), sc.estimate(), sc.variance())
        ch = sequential_change(*args, st.n + sc.n) if sequential else relative_change(*args)
        out.append(ch.p_value)
    return out


def ab_rows(trials: int) -> list[list[str]]:
    rng = np.random.default_rng(31)
    rates = (0.3, 0.1, 0.5, 0.2, 0.7)

    def arm(users: int) -> tuple:
        x = 1 + rng.poisson(2.0, size=users)
        return x.astype(float), [rng.binomial(x, p).astype(float) for p in rates]

    counts = dict.fromkeys(("raw", "holm", "fixed", "anytime"), 0)
    for _ in range(trials):
        arms = (arm(2000), arm(2000))
        p = _p(arms, 400, False)
        counts["raw"] += min(q for q in p if q is not None) < 0.05
        counts["holm"] += min(q for q in holm(p) if q is not None) < 0.05
        looks = range(100, 2001, 100)
        counts["fixed"] += any((_p(arms, n, False)[0] or 1) < 0.05 for n in looks)
        counts["anytime"] += any((_p(arms, n, True)[0] or 1) < 0.05 for n in looks)
    names = {
        "raw": "A/B: any false alarm of 5 null metrics, unadjusted",
        "holm": "A/B: any false alarm of 5 null metrics, Holm",
        "fixed": "A/B: any significant of 20 refreshes, fixed 95 % CI",
        "anytime": "A/B: any significant of 20 refreshes, --sequential",
    }
    return [[names[k], "0.05", f"{v / trials:.3f} +- {np.sqrt(0.05 * 0.95 / trials):.3f}", ""]
            for k, v in counts.items()]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=400)
    args = parser.parse_args()
    rows = canary_rows(args.trials) + ab_rows(args.trials)
    print(f"{args.trials} trials per world; +- is one Monte-Carlo standard error")
    print(format_table(["world", "nominal", "measured", ""], rows))
    write_results("canary", {"machine": machine(), "rows": rows, "trials": args.trials})
    return 0


if __name__ == "__main__":
    sys.exit(main())
