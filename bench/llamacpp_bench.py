#!/usr/bin/env python3
"""llama.cpp as the CPU serving engine, against the project's transformers sampler, in one run:

* completion tokens/s of llama-server on SmolLM2-135M-Instruct (its 4-bit GGUF) asked through the
  gateway's adapter (``serving.backends.llamacpp.LlamaCppBackend``: apply-template, tokenize,
  completion),
  with 1 client and with 16 concurrent clients;
* completion tokens/s of ``CausalLMPolicy.sample`` (transformers, the same GGUF dequantized to
  float32) on the same prompts and budget, one prompt at a time and 16 together;
* the per-token mismatch between llama.cpp's behaviour log-probabilities and the learner's scoring
  of the same prompt + completion (``models.mismatch``: KL estimates k1 and k3, largest gap).

    python bench/llamacpp_bench.py [--max-tokens 64] [--rounds 1] [--threads 2] [--slots 8]
                                   [--weights gguf|f16|f32]

``--weights f16`` serves the learner's own (dequantized) weights at f16, as ``rtrl serve
--engine-exact`` does; the mismatch then measures llama.cpp's kernels alone.

Needs the built server (``python -m llamacpp.build``). Figures to stdout and
``bench/out/llamacpp.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})

import torch  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import model_ref, register_base  # noqa: E402
from infra.kafka_dist import default_cache_root  # noqa: E402
from infra.ports import free_port_block  # noqa: E402
from llamacpp.build import server_binary  # noqa: E402
from llamacpp.convert import dequantized_base  # noqa: E402
from llamacpp.server import EngineConfig, LlamaServer  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402
from models.generation import Generation  # noqa: E402
from models.loading import load_base  # noqa: E402
from models.mismatch import mismatch  # noqa: E402
from models.policy import CausalLMPolicy  # noqa: E402
from models.sampling import SamplingParams  # noqa: E402
from serving.backends.base import BackendRequest  # noqa: E402
from serving.backends.llamacpp import LlamaCppBackend  # noqa: E402
from serving.protocol import ChatCompletionRequest  # noqa: E402

TASKS = [
    "Write a Python function that reverses a list.",
    "What is the capital of France? Answer in one word.",
    "Explain recursion to a child.",
    "Write `is_prime(n)` in Python.",
    "List three uses of a hash map.",
    "What does HTTP stand for?",
    "Write a haiku about autumn.",
    "How do I read a file line by line in Python?",
    "Give two differences between a list and a tuple.",
    "Write `fizzbuzz(n)` in Python.",
    "What is 12 times 12?",
    "Summarise what a unit test is.",
    "Write a SQL query that counts rows in a table named users.",
    "What is a closure in JavaScript?",
    "Name three sorting algorithms.",
    "Write a regular expression that matches an email address.",
]


Chat = list[dict[str, str]]


async def engine_round(backend: LlamaCppBackend, chats: list[Chat], params: SamplingParams,
                       clients: int) -> tuple[list[Generation], float]:  # fmt: skip
    """Every chat asked through the adapter, ``clients`` at a time; the wall time."""
    queue = list(chats)
    out: list[Generation] = []

    async def client() -> None:
        while queue:
            messages = queue.pop()
            raw = {"messages": messages}
            request = ChatCompletionRequest.model_validate(raw)
            out.append(await backend.chat(BackendRequest(backend.current, request, raw, params)))

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return out, time.perf_counter() - started


def sampler_round(policy: CausalLMPolicy, prompts: list[list[int]], params: SamplingParams,
                  batch: int) -> tuple[int, float]:  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    tokens = 0
    started = time.perf_counter()
    for start in range(0, len(prompts), batch):
        done = policy.sample(prompts[start : start + batch], params, generator)
        tokens += sum(len(c.token_ids) for c in done)
    return tokens, time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1, help="each prompt set this many times")
    ap.add_argument("--threads", type=int, default=2, help="llama-server's and torch's threads")
    ap.add_argument("--slots", type=int, default=8, help="llama-server's parallel slots")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--weights", choices=("gguf", "f16", "f32"), default="gguf",
                    help="what llama-server loads: the shipped GGUF (4-bit), or the learner's "
                    "dequantized weights at f16 or f32 (rtrl serve --engine-exact)")  # fmt: skip
    args = ap.parse_args()
    binary = server_binary(default_cache_root(os.environ))
    if not binary.is_file():
        print(f"llama-server is not built at {binary}: python -m llamacpp.build")
        return 2
    torch.set_num_threads(args.threads)
    base = load_base(fetch("smollm2-135m", models_dir()))
    policy = CausalLMPolicy(base.model, base.tokenizer)
    params = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens
    )
    chats = [[{"role": "user", "content": t}] for t in TASKS] * args.rounds
    prompts = [policy.chat_prompt(c) for c in chats]
    results: dict[str, object] = {"machine": machine(), "args": vars(args)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        registry = CheckpointRegistry(Path(tmp) / "registry")
        register_base(registry, "smol-0000", base.path)
        served = base.path
        if args.weights != "gguf":  # as rtrl serve --engine-exact serves it
            cache = default_cache_root(os.environ)
            served = dequantized_base(model_ref(base), cache, Path(tmp), args.weights, print)
        config = EngineConfig(
            binary, served, free_port_block(1), threads=args.threads, slots=args.slots
        )
        with LlamaServer(config, Path(tmp) / "server.log") as server:
            gens: list[Generation] = []
            for clients in (1, 16):
                backend = LlamaCppBackend(
                    server.url, registry, "smol-0000", "smol", Path(tmp) / "adapters"
                )

                async def run(b: LlamaCppBackend = backend, n: int = clients):
                    try:
                        return await engine_round(b, chats, params, n)
                    finally:
                        await b.close()

                done, wall = asyncio.run(run())
                tokens = sum(len(g.token_ids or ()) for g in done)
                name = f"llama.cpp {args.weights} ({args.slots} slots)"
                rows.append([name, clients, tokens, wall, tokens / wall])
                gens.extend(done)
    for batch in (1, 16):
        tokens, wall = sampler_round(policy, prompts, params, batch)
        rows.append(["transformers sampler", batch, tokens, wall, tokens / wall])
    results["throughput"] = [
        dict(zip(["engine", "clients", "tokens", "seconds", "tokens_per_s"], r, strict=True))
        for r in rows
    ]
    exact = [g for g in gens if g.logprobs is not None and g.token_ids and g.prompt_ids]
    with torch.no_grad():
        scored = policy.score(
            [list(g.prompt_ids or ()) for g in exact],
            [list(g.token_ids or ()) for g in exact],
            args.temperature,
            args.top_p,
        )
    gap = mismatch([g.logprobs or () for g in exact], [s.tolist() for s in scored])
    results["mismatch"] = {**gap.to_json_dict(), "completions": len(exact), "of": len(gens)}
    print(format_table(["engine", "clients/batch", "tokens", "s", "tokens/s"], rows))
    print(f"\nmismatch over {gap.tokens} tokens of {len(exact)}/{len(gens)} completions: "
          f"KL k1 {gap.kl_k1:.5f}, k3 {gap.kl_k3:.5f} nats/token, "
          f"largest |diff| {gap.max_abs_diff:.3f}")  # fmt: skip
    print(f"results: {write_results('llamacpp', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
