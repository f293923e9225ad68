#!/usr/bin/env python3
"""Scoring an agent run's calls inside its last call's sequence (packing) against scoring each
call on its own, on recorded agent runs, in the same run: positions the model reads, seconds,
and calls scored a second, without gradients (``pi_old``, the gate's held-out scoring) and with
them (the update's forward and backward).

The runs are a batch the warehouse cut for an agent world's first checkpoint (``rtrl run
--world agent --model smollm2-135m --engine llama.cpp ...``, whose data directory is
``--data-dir``); its calls are read as the trainer reads them (``models.examples``), ordered as
the learner orders them (``models.scoring.by_length``: a run's calls next to each other) and
scored in micro-batches of ``--micro-batch`` calls. Both ways give the same log-probabilities
(``tests/models/test_policy.py``); only the work differs.
Figures to stdout and ``bench/out/packing.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import torch  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import load_policy  # noqa: E402
from models.examples import Example, read_examples  # noqa: E402
from models.policy import CausalLMPolicy  # noqa: E402
from models.scoring import by_length  # noqa: E402
from models.token_scorer import score_batch  # noqa: E402


def _batch_of(data_dir: Path, checkpoint: str) -> Path:
    found = sorted((data_dir / "warehouse" / "_batches" / "data").glob(f"b-{checkpoint}-*.parquet"))
    if not found:
        sys.exit(f"no batch of {checkpoint} under {data_dir}: run `rtrl run --world agent "
                 f"--model smollm2-135m --engine llama.cpp --data-dir {data_dir}` "
                 "first")  # fmt: skip
    return found[0]


def _score(policy: CausalLMPolicy, examples: list[Example], micro: list[list[int]], pack: bool,
           grad: bool) -> dict[str, Any]:  # fmt: skip
    """Every micro-batch scored once; with ``grad``, each one's summed log-probs back-propagated.
    The positions read are counted before the clock starts."""
    positions = sum(
        score_batch([examples[i].rollout.prompt_ids for i in part],
                    [examples[i].rollout.completion_ids for i in part], policy.pad_id,
                    pack=pack).input_ids.numel()
        for part in micro
    )  # fmt: skip
    started = time.perf_counter()
    for part in micro:
        rollouts = [examples[i].rollout for i in part]
        prompts = [r.prompt_ids for r in rollouts]
        completions = [r.completion_ids for r in rollouts]
        with torch.set_grad_enabled(grad):
            out = policy.score(prompts, completions, [r.sampling.temperature for r in rollouts],
                               [r.sampling.top_p for r in rollouts], pack=pack)  # fmt: skip
            if grad:
                torch.stack([o.sum() for o in out]).sum().backward()
                policy.model.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - started
    calls = sum(map(len, micro))
    return {"positions": int(positions), "seconds": round(seconds, 2),
            "calls_per_s": round(calls / seconds, 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(".rtrl/agent4"),
                        help="an agent world run's data directory")  # fmt: skip
    parser.add_argument("--checkpoint", default="smollm2-0000")
    parser.add_argument("--runs", type=int, default=8, help="agent runs scored (all: 0)")
    parser.add_argument("--micro-batch", type=int, default=8)
    args = parser.parse_args()

    path = _batch_of(args.data_dir, args.checkpoint)
    registry = CheckpointRegistry(args.data_dir / "checkpoints")
    policy = load_policy(registry, registry.get(args.checkpoint))
    examples = read_examples(path).examples
    runs = list(dict.fromkeys(e.rollout.interaction_id for e in examples))
    if args.runs:
        chosen = set(runs[: args.runs])
        examples = [e for e in examples if e.rollout.interaction_id in chosen]
    order = by_length(examples, range(len(examples)))
    micro = [order[k : k + args.micro_batch] for k in range(0, len(order), args.micro_batch)]
    n_runs = len({e.rollout.interaction_id for e in examples})
    print(f"{len(examples)} calls of {n_runs} runs ({path.name}), micro-batches of "
          f"{args.micro_batch}", file=sys.stderr)  # fmt: skip

    results: dict[str, Any] = {"machine": machine(), "batch": path.name, "runs": n_runs,
                               "calls": len(examples), "micro_batch": args.micro_batch}  # fmt: skip
    rows = []
    for grad in (False, True):
        what = "forward and backward" if grad else "forward (no gradients)"
        apart = _score(policy, examples, micro, pack=False, grad=grad)
        packed = _score(policy, examples, micro, pack=True, grad=grad)
        results["grad" if grad else "no_grad"] = {"apart": apart, "packed": packed}
        for name, r in (("each call apart", apart), ("packed", packed)):
            rows.append([what, name, r["positions"], r["seconds"], r["calls_per_s"]])
        rows.append([what, "packed / apart", f"{packed['positions'] / apart['positions']:.2f}",
                     f"{packed['seconds'] / apart['seconds']:.2f}", ""])  # fmt: skip
    print(format_table(["pass", "calls scored", "positions read", "seconds", "calls/s"], rows))
    print(f"results: {write_results('packing', results)}")


if __name__ == "__main__":
    main()
