#!/usr/bin/env python3
"""A base model's pass rate on the coding tasks, through the project's own path: the policy
samples an answer to each task's prompt, the agent harness takes the code out of its text, the
sandbox runs the task's hidden cases (``release.task_evals.task_passes``).

The figure the code world starts from: SmolLM2-135M-Instruct on the easy tasks (the ones users
ask for, which it trains on) and on the held-out ones (only the evals see them). Per task the
passes, and per group the rate with its 95 % Wilson interval. To stdout and
``bench/out/task_pass_rate.json``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def main() -> int:
    import torch

    from agent.tasks import load_tasks
    from models.catalog import models_dir, resolve
    from models.loading import load_base
    from models.policy import CausalLMPolicy
    from models.sampling import SamplingParams
    from release.task_evals import task_passes

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="smollm2-135m", help="a catalog name or a local path")
    p.add_argument("--groups", nargs="+", default=["easy", "held_out"])
    p.add_argument("--samples", type=int, default=4, help="answers per task")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    base = load_base(resolve(args.model, models_dir()))
    policy = CausalLMPolicy(base.model, base.tokenizer)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature)
    results: dict[str, dict] = {}
    for group in args.groups:
        tasks = load_tasks(group)  # type: ignore[arg-type]
        started = time.perf_counter()
        passed = task_passes(policy, params, args.samples, args.seed, tasks)
        wall = time.perf_counter() - started
        per_task = {t.function: sum(passed[i * args.samples : (i + 1) * args.samples])
                    for i, t in enumerate(tasks)}  # fmt: skip
        k, n = sum(passed), len(passed)
        low, high = wilson(k, n)
        results[group] = {"passed": k, "answers": n, "rate": k / n, "ci95": [low, high],
                          "per_task": per_task, "wall_s": wall}  # fmt: skip
        print(f"{group}: {k}/{n} pass = {k / n:.1%} (95 % CI {low:.1%}-{high:.1%}), "
              f"{wall:.0f} s", flush=True)  # fmt: skip
        print("  " + ", ".join(f"{f} {c}/{args.samples}" for f, c in per_task.items()))
    write_results("task_pass_rate", {"machine": machine(), "args": vars(args), "groups": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
