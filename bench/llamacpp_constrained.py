#!/usr/bin/env python3
"""Constrained tool calls on llama.cpp beside unconstrained answers, in one run: completion
tokens/s of the ``--engine llama.cpp`` backend (our patched llama-server, SmolLM2 served as the
learner computes it, ``exact``) on the agent world's prompt and tools, asked
``tool_choice: auto`` (no grammar) and ``required`` (the GBNF grammar of calls, sampled
grammar-first), with ``--clients`` requests in flight; and the share of constrained answers that
are valid calls. The two kinds take turns, ``--requests`` of each a round for ``--rounds``
rounds, so that a machine shared with other work slows both alike.

    python bench/llamacpp_constrained.py [--requests 8] [--rounds 3] [--clients 4]
                                         [--max-tokens 64]

Needs the built server (``python -m llamacpp.build``). Figures to stdout and
``bench/out/llamacpp_constrained.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})

from agent.tool_agent import SYSTEM, tool_definitions  # noqa: E402
from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import register_base  # noqa: E402
from infra.kafka_dist import default_cache_root  # noqa: E402
from llamacpp.build import server_binary  # noqa: E402
from llamacpp.fleet import EngineFleet, EngineSettings  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402
from models.sampling import SamplingParams  # noqa: E402
from serving.admission import Admission  # noqa: E402
from serving.assignment import Assignment  # noqa: E402
from serving.backends.base import BackendRequest  # noqa: E402
from serving.backends.llamacpp_engine import EngineBackend  # noqa: E402
from serving.protocol import ChatCompletionRequest  # noqa: E402
from serving.routing import CURRENT  # noqa: E402
from serving.tool_calls import read, reading_of  # noqa: E402

TASKS = [
    "Make `add(a, b)` in calc.py return the sum.",
    "The test of `reverse` fails: fix it.",
    "Write `is_even(n)` in numbers.py.",
    "Read the README, then run the tests.",
]


def _request(task: str, choice: str) -> tuple[ChatCompletionRequest, dict[str, Any]]:
    raw = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}],
           "tools": tool_definitions(), "tool_choice": choice,
           "parallel_tool_calls": False}  # fmt: skip
    return ChatCompletionRequest.model_validate(raw), raw


async def _run(backend: EngineBackend, choice: str, args: argparse.Namespace) -> dict[str, Any]:
    admission = Admission(backend, Assignment(backend), (), args.max_tokens)  # type: ignore[arg-type]
    params = SamplingParams(temperature=1.0, max_tokens=args.max_tokens)
    queue = list(range(args.requests))
    tokens, valid, cut = 0, 0, 0

    async def client() -> None:
        nonlocal tokens, valid, cut
        while queue:
            k = queue.pop()
            req, raw = _request(TASKS[k % len(TASKS)], choice)
            reading = reading_of(req)
            constraint = admission.constraint(req, reading)
            asked = BackendRequest(backend.target(CURRENT), req, raw, params, None, None,
                                   constraint)  # fmt: skip
            gen = await backend.chat(asked)
            tokens += len(gen.token_ids or ())
            cut += gen.finish_reason == "length"
            parsed = read(gen, reading) if reading is not None else None
            valid += bool(parsed is not None and parsed.calls and not parsed.broken)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(args.clients)))
    wall = time.perf_counter() - started
    return {"tool_choice": choice, "requests": args.requests, "completion_tokens": tokens,
            "wall_s": round(wall, 2), "tokens_per_s": round(tokens / wall, 1),
            "valid_calls": valid, "cut_by_budget": cut}  # fmt: skip


async def _both(backend: EngineBackend, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Unconstrained and constrained in turns on the same server, summed by kind; then the
    server is stopped."""
    totals: dict[str, dict[str, Any]] = {}
    try:
        for _ in range(args.rounds):
            for choice in ("auto", "required"):
                run = await _run(backend, choice, args)
                total = totals.setdefault(choice, dict.fromkeys(run, 0) | {"tool_choice": choice})
                for key in ("requests", "completion_tokens", "wall_s", "valid_calls",
                            "cut_by_budget"):  # fmt: skip
                    total[key] += run[key]
    finally:
        await backend.close()
    for total in totals.values():
        total["wall_s"] = round(total["wall_s"], 1)
        total["tokens_per_s"] = round(total["completion_tokens"] / total["wall_s"], 1)
    return list(totals.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8, help="of each kind, a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    cache = default_cache_root(os.environ)
    smollm2 = fetch("smollm2-135m", models_dir(), log=lambda _: None)
    with tempfile.TemporaryDirectory() as tmp:
        registry = CheckpointRegistry(Path(tmp) / "registry")
        register_base(registry, "smol", smollm2)
        settings = EngineSettings(binary=server_binary(cache), cache_root=cache,
                                  log_dir=Path(tmp) / "logs", threads=args.threads,
                                  slots=args.clients, exact=True)  # fmt: skip
        backend = EngineBackend(EngineFleet(settings, registry), registry, "smol")
        runs = asyncio.run(_both(backend, args))
    rows = [[r["tool_choice"], r["requests"], r["completion_tokens"], r["wall_s"],
             r["tokens_per_s"], r["valid_calls"], r["cut_by_budget"]] for r in runs]  # fmt: skip
    print(format_table(["tool_choice", "requests", "tokens", "wall s", "tokens/s", "valid calls",
                        "cut by budget"], rows))  # fmt: skip
    out = write_results("llamacpp_constrained", {"machine": machine(), "args": vars(args),
                                                 "runs": runs})  # fmt: skip
    print(f"written to {out}")


if __name__ == "__main__":
    main()
