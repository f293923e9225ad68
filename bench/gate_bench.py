#!/usr/bin/env python3
"""What the gate costs, measured in the same run beside its cheapest peer:

* the decision on a round of ``--interactions`` held-out interactions (default 10k, 48 tokens
  each, from 1,000 users): the user-level lower bound (``release.offpolicy_bound.estimate_gain``,
  CR2 with a Bell-McCaffrey t) against the point estimate alone;
* the canary's verdict (``release.canary.judge``: SRM, a one-sided test per monitored rate and
  of the reward, from per-user sums) on ``--interactions`` users against the difference of the
  two arms' means alone;
* candidate evals per 100 prompts (``release.candidate_evals.compare_behaviour``: parent and
  candidate each generate ``--samples`` completions a prompt) on the tiny model and, with
  ``--models tiny,smollm2-135m``, SmolLM2-135M on the CPU, beside sampling the same completions
  alone (what the evals cannot go below).

Figures to stdout and ``bench/out/gate.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})

import numpy as np  # noqa: E402
import torch  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import load_policy, register_base  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402
from models.sampling import SamplingParams  # noqa: E402
from release.canary import UserSums, arm_of, judge  # noqa: E402
from release.canary_config import CanaryConfig  # noqa: E402
from release.candidate_evals import compare_behaviour, eval_prompts  # noqa: E402
from release.offpolicy_bound import estimate_gain  # noqa: E402
from rewards.monitors import MonitorThresholds  # noqa: E402
from rtrl.worlds.token_reader import SimulatedBehaviour  # noqa: E402


def bench_decision(n: int, tokens: int) -> list:
    rng = np.random.default_rng(0)
    log_w = rng.normal(0, 0.1, size=(n, tokens)).sum(1)
    rewards = rng.binomial(1, 0.4, size=n).astype(float)
    users = rng.integers(0, 1000, size=n)
    started = time.perf_counter()
    estimate_gain(users, rewards, log_w, reward_min=0.0, reward_max=1.0)
    bound = time.perf_counter() - started
    started = time.perf_counter()
    estimate_gain(users, rewards, log_w, reward_min=0.0, reward_max=1.0, bound=False)
    point = time.perf_counter() - started
    return [
        "decision",
        f"{n} interactions",
        f"{bound:.3f} s",
        f"{point:.3f} s",
        round(bound / point, 1),
    ]


def bench_canary(n: int) -> list:
    rng = np.random.default_rng(1)
    interactions = rng.integers(1, 5, size=n)
    arms = rng.random(n) < 0.1
    users = [
        UserSums(int(k), int(k), float(rng.normal(0.2, 1.0) * k), {"edit_rate": int(k)})
        for k in interactions
    ]
    started = time.perf_counter()
    parent = arm_of([u for u, a in zip(users, arms, strict=True) if not a])
    canary = arm_of([u for u, a in zip(users, arms, strict=True) if a])
    judge(parent, canary, CanaryConfig(), MonitorThresholds(), 1)
    verdict = time.perf_counter() - started
    started = time.perf_counter()
    means = [np.mean([u.reward / u.scored for u, a in zip(users, arms, strict=True) if a == side])
             for side in (False, True)]  # fmt: skip
    float(means[1] - means[0])
    alone = time.perf_counter() - started
    return ["canary verdict", f"{n} users", f"{verdict:.3f} s", f"{alone:.3f} s",
            round(verdict / alone, 1)]  # fmt: skip


def bench_evals(name: str, prompts: int, samples: int, tokens: int) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        registry = CheckpointRegistry(Path(tmp))
        root = register_base(registry, "g-0000", fetch(name, models_dir()))
        parent, candidate = load_policy(registry, root), load_policy(registry, root)
        params = SamplingParams(max_tokens=tokens)
        asks = eval_prompts(parent, [], 0)
        asks = (asks * (prompts // len(asks) + 1))[:prompts]
        started = time.perf_counter()
        compare_behaviour(
            parent, candidate, asks, params, SimulatedBehaviour(parent.vocab_size), samples=samples
        )
        evals = time.perf_counter() - started
        batch = [p for p in asks for _ in range(samples)]
        generator = torch.Generator().manual_seed(0)
        started = time.perf_counter()
        for policy in (parent, candidate):
            for start in range(0, len(batch), 32):
                policy.sample(batch[start : start + 32], params, generator)
        alone = time.perf_counter() - started
    per_100 = 100 / prompts
    return [
        f"candidate evals, {name}",
        f"100 prompts x {samples} x {tokens} tokens",
        f"{evals * per_100:.1f} s",
        f"{alone * per_100:.1f} s",
        round(evals / alone, 2),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interactions", type=int, default=10_000)
    parser.add_argument("--models", default="tiny")
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    rows = [bench_decision(args.interactions, 48), bench_canary(args.interactions)]
    for name in args.models.split(","):
        rows.append(bench_evals(name, args.prompts, args.samples, args.tokens))
    print(format_table(["what", "size", "time", "its limit", "ratio"], rows))
    write_results("gate", {"machine": machine(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
