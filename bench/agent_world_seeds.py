#!/usr/bin/env python3
"""Whether the agent world's model gets better at its tasks: `rtrl run --world agent` (SmolLM2 on
llama.cpp, constrained tool calls, the agent reward) once per seed, one after another, and each
run's rounds and closing A/B read back from its ``summary.json``. The goal (issue 46): tasks
solved per interaction, the primary metric (the hidden tests on the repository each run left),
rises with a 95 % CI above 0 in at least 4 of 5 fresh seeds, and in a CI pooled over them, each
run within 40 minutes on two cores.

    python bench/agent_world_seeds.py [--seeds 1-5] [--root /tmp/agent-seeds] [--resume]
    python bench/agent_world_seeds.py --report-only --root /tmp/agent-seeds

Each seed runs in ``--root/seed-N`` with its output in ``seed-N.log``, as
``bench/code_world_seeds.py`` runs them; options after ``--`` go to every `rtrl run` (the
default: ``--rounds 2 --extra-rounds 1``). The pooled interval weighs each seed's log ratio of
treatment to control by its inverse variance, read off its 95 % interval (a normal
approximation of each seed's Fieller interval, fair where the controls are far from 0).
Figures to stdout and ``bench/out/agent_world_seeds.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, reexec_in_venv, write_results  # noqa: E402
from code_world_seeds import collect, seed_range  # noqa: E402

LOOP_LIMIT_S = 40 * 60
SEEDS_NEEDED = 0.8
PRIMARY = "tasks_solved_per_interaction"
METRICS = (PRIMARY, "kept_per_interaction", "dissatisfied_rate",
           "invalid_tool_calls_per_interaction", "tool_calls_per_interaction",
           "tool_call_share")  # fmt: skip
DEFAULT_RUN = ["--world", "agent", "--rounds", "2", "--extra-rounds", "1"]


def seed_row(seed: int, summary: dict[str, Any]) -> dict[str, Any]:
    """One seed's figures: loop time, each round's tasks solved and broken-call share with the
    gate's decision, and the closing A/B's metrics (None when nothing was promoted)."""
    closing = next((t for t in summary["ab"] if t["closing"]), None)
    metrics = {m["name"]: m for m in closing["metrics"]} if closing else {}
    primary = metrics.get(PRIMARY)
    return {
        "seed": seed,
        "loop_s": summary.get("loop_s"),
        "rounds": [
            {
                "solved": r.get("pass_share"),
                "broken": r.get("broken_tool_call_share"),
                "calls": r.get("tool_calls"),
                "users": r.get("users"),
                "decision": r.get("gate_decision"),
            }
            for r in summary["rounds"]
        ],  # fmt: skip
        "promoted": sum(c["status"] == "promoted" for c in summary["checkpoints"]),
        "ab": {name: metrics.get(name) for name in METRICS},
        "learned": bool(primary and primary["ci_low"] is not None and primary["ci_low"] > 0),
    }


def pooled(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """The primary metric's relative change pooled over the seeds (inverse-variance weights on
    the log ratio), with its 95 % interval; None without two seeds that have one."""
    logs, weights = [], []
    for r in rows:
        m = r["ab"].get(PRIMARY)
        if not m or None in (m["change"], m["ci_low"], m["ci_high"]) or m["ci_low"] <= -1:
            continue
        se = (math.log1p(m["ci_high"]) - math.log1p(m["ci_low"])) / (2 * 1.96)
        logs.append(math.log1p(m["change"]))
        weights.append(1 / se**2)
    if len(logs) < 2:
        return None
    mean = sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights)
    se = math.sqrt(1 / sum(weights))
    return {"change": math.expm1(mean), "ci_low": math.expm1(mean - 1.96 * se),
            "ci_high": math.expm1(mean + 1.96 * se), "seeds": len(logs)}  # fmt: skip


def _pct(m: dict[str, Any] | None) -> str:
    if not m or m["change"] is None:
        return "-"
    ci = ("no CI" if m["ci_low"] is None else
          f"[{100 * m['ci_low']:+.0f}, {100 * m['ci_high']:+.0f}]")  # fmt: skip
    return f"{m['control']:.3f}->{m['treatment']:.3f} {100 * m['change']:+.0f} % {ci}"


def report(rows: list[dict[str, Any]], missing: list[int]) -> dict[str, Any]:
    print(format_table(["seed", "loop min", "rounds: solved (gate)", "promoted", *METRICS],
                       [[r["seed"], f"{r['loop_s'] / 60:.1f}" if r["loop_s"] else "-",
                         " ".join(f"{x['solved']:.2f}({(x['decision'] or '-')[:4]})"
                                  for x in r["rounds"] if x["solved"] is not None),
                         r["promoted"], *(_pct(r["ab"][m]) for m in METRICS)]
                        for r in rows]))  # fmt: skip
    learned = sum(r["learned"] for r in rows)
    pool = pooled(rows)
    figures = {"seeds": len(rows), "learned": learned, "needed": SEEDS_NEEDED * len(rows),
               "pooled": pool, "loop_limit_s": LOOP_LIMIT_S, "missing": missing,
               "rows": rows}  # fmt: skip
    print(f"\ntasks solved per interaction up with a 95 % CI above 0: {learned} of {len(rows)} "
          f"seeds (the goal: {SEEDS_NEEDED * len(rows):.0f})")  # fmt: skip
    if pool:
        print(f"pooled over {pool['seeds']} seeds: {100 * pool['change']:+.0f} % "
              f"[{100 * pool['ci_low']:+.0f} %, {100 * pool['ci_high']:+.0f} %]")  # fmt: skip
    if missing:
        print(f"no summary (the run failed; see its log): seeds {missing}")
    return figures


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else DEFAULT_RUN
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=seed_range, default=seed_range("1-5"))
    p.add_argument("--root", type=Path, default=Path("/tmp/agent-seeds"))
    p.add_argument("--resume", action="store_true", help="skip seeds that have a summary")
    p.add_argument("--report-only", action="store_true", help="run nothing; read the summaries")
    args = p.parse_args(argv)
    rows, missing = collect(args.seeds, args.root, args.resume, args.report_only, extra, seed_row)
    figures = report(rows, missing)
    print(f"figures: {write_results('agent_world_seeds', figures)}")
    return 0


if __name__ == "__main__":
    reexec_in_venv(__file__)
    sys.exit(main())
