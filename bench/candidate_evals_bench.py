#!/usr/bin/env python3
"""What a round's candidate evals cost on a real model, and what the pairing buys: the code
world's gate evals (``release.eval_round.candidate_evals``) of a candidate against its parent,
timed at a few sample sizes, each test's paired p-value beside the p-value the same outcomes
would give as two independent samples.

    python bench/candidate_evals_bench.py --registry DATA/checkpoints \\
        --parent smollm2-0000 --candidate smollm2-0003 [--samples 2,4,8] \\
        [--engines transformers,llama.cpp]

DATA is an ``rtrl run --world code`` data directory (its ``checkpoints`` folder is the
registry). The recent prompts are the first ``--prompts`` easy tasks' (what the code world's
users ask); the task pass rate is read on ``--tasks``; answers are sampled as the code world's
users are (``CodeWorldSettings.sampling``). The cost to beat is the issue's: ~53 minutes for the
default gate's evals on SmolLM2 (64 recent prompts, the shipped tasks, 4 samples, unpaired).
With ``llama.cpp`` among ``--engines`` the same evals are sampled as ``rtrl train --eval-engine
llama.cpp --eval-engine-exact`` samples them (``trainer.round_evals``: a llama-server each, the
candidate's adapter converted from memory, cached), timed with the servers' start, beside the
transformers sampler in the same run. Figures to stdout and ``bench/out/candidate_evals.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import torch  # noqa: E402

from agent.tasks import GROUPS, Group, load_tasks  # noqa: E402
from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import load_policy  # noqa: E402
from llamacpp.cli import engine_settings  # noqa: E402
from models.policy import CausalLMPolicy, Sampler  # noqa: E402
from release.candidate_evals import RateTest, one_sided_test  # noqa: E402
from release.eval_round import candidate_evals  # noqa: E402
from release.gate import GateConfig  # noqa: E402
from rtrl.worlds.code_world import CodeWorldSettings  # noqa: E402
from trainer.round_evals import engine_pair  # noqa: E402


def unpaired(test: RateTest) -> RateTest:
    """The same outcomes read as two independent samples (the test before the pairing)."""
    n = test.n
    parent = [True] * round(test.parent * n) + [False] * (n - round(test.parent * n))
    candidate = [True] * round(test.candidate * n) + [False] * (n - round(test.candidate * n))
    return one_sided_test(test.metric, parent, candidate, 0.05, 0.2, 0.05)


@contextmanager
def samplers(engine: str, registry: CheckpointRegistry, args: argparse.Namespace,
             parent: CausalLMPolicy, candidate: CausalLMPolicy
             ) -> Iterator[tuple[Sampler, Sampler]]:  # fmt: skip
    """The two checkpoints' samplers: the loaded policies, or a llama-server each."""
    if engine == "transformers":
        yield parent, candidate
        return
    if engine != "llama.cpp":
        raise SystemExit(f"--engines: transformers or llama.cpp, not {engine!r}")
    info = registry.get(args.candidate)
    if info.weights.lora is None:
        raise SystemExit(f"{args.candidate} is not a LoRA checkpoint: llama.cpp evals need one")
    settings = engine_settings(args.threads, 16, exact=True)
    with engine_pair(settings, registry, registry.get(args.parent), args.candidate, candidate,
                     info.weights.lora) as pair:  # fmt: skip
        yield pair


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--registry", type=Path, required=True)
    ap.add_argument("--parent", required=True)
    ap.add_argument("--candidate", required=True)
    ap.add_argument("--samples", default="2,4,8", help="answers per prompt and task, a list")
    ap.add_argument("--prompts", type=int, default=4, help="recent prompts (the code world's 4)")
    ap.add_argument("--tasks", default="held_out", choices=GROUPS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--engines", default="transformers", help="a list: transformers, llama.cpp")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    registry = CheckpointRegistry(args.registry)
    started = time.perf_counter()
    parent, candidate = (
        load_policy(registry, registry.get(c)) for c in (args.parent, args.candidate)
    )
    load_s = time.perf_counter() - started
    print(f"loaded {args.parent} and {args.candidate} in {load_s:.1f} s")
    params = CodeWorldSettings().sampling  # what the code world's users are answered with
    recent = [
        parent.chat_prompt([{"role": "user", "content": task.prompt}])
        for task in load_tasks("easy")[: args.prompts]
    ]
    group: Group = args.tasks
    tasks = len(load_tasks(group))
    header = ["engine", "samples", "answers a checkpoint", "s", "s an answer", "metric",
              "parent", "candidate", "discordant (bad, good)", "paired p", "unpaired p",
              "alarm"]  # fmt: skip
    rows: list[list[object]] = []
    runs = []
    for engine in args.engines.split(","):
        for samples in (int(s) for s in args.samples.split(",")):
            gate = GateConfig(eval_prompts=args.prompts, eval_samples=samples, eval_tasks=group)
            started = time.perf_counter()
            with samplers(engine, registry, args, parent, candidate) as (before, after):
                tests = candidate_evals(before, after, recent, params, gate, args.seed,
                                        vocab_size=candidate.vocab_size)  # fmt: skip
            seconds = time.perf_counter() - started
            # the shipped group: its eval prompts' answers, then the tasks' graded ones; any
            # other group's task answers are sampled once, read for behaviours and graded
            answers = samples * (args.prompts + (2 * tasks if group == "shipped" else tasks))
            for test in tests:
                rows.append([engine, samples, answers, round(seconds),
                             round(seconds / (2 * answers), 2), test.metric,
                             round(test.parent, 3), round(test.candidate, 3), test.discordant,
                             round(test.p_value, 4), round(unpaired(test).p_value, 4),
                             test.alarm])  # fmt: skip
            read = [vars(t) | {"unpaired_p": unpaired(t).p_value} for t in tests]
            runs.append({"engine": engine, "samples": samples, "answers_per_checkpoint": answers,
                         "seconds": seconds, "tests": read})  # fmt: skip
            print(format_table(header, rows[-len(tests) :]), flush=True)
    print()
    print(format_table(header, rows))
    default = GateConfig()
    shipped = len(load_tasks("shipped"))
    default_answers = default.eval_samples * (default.eval_prompts + 2 * shipped)
    for engine in args.engines.split(","):
        last = [r for r in runs if r["engine"] == engine][-1]
        per_answer = last["seconds"] / (2 * last["answers_per_checkpoint"])
        print(f"the default gate's evals ({default.eval_prompts} recent prompts, {shipped} "
              f"shipped tasks, {default.eval_samples} samples) at {engine}'s rate: "
              f"{2 * default_answers * per_answer / 60:.0f} min")  # fmt: skip
    results = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()},
               "load_s": load_s, "runs": runs}  # fmt: skip
    print(f"figures: {write_results('candidate_evals', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
