#!/usr/bin/env python3
"""Several llama-servers on one machine, as the closing A/B and a canary run them (one server a
checkpoint): completion tokens/s of all of them together, with each taking every thread, and with
the threads divided among them (``llamacpp.fleet.threads_per_server``), beside one
server alone on the same cores; each beside a float32 matmul's GFLOP/s measured in the same run
(the machine's compute limit), counting 2N model FLOPs a decoded token as MFU does.

    python bench/llamacpp_servers.py [--servers 2] [--threads 2] [--slots 16] [--requests 32]

Each server is asked ``--requests`` completions of ``--max-tokens`` tokens (``ignore_eos``, so
every configuration decodes the same tokens), ``--slots`` at a time. Needs the built server
(``python -m llamacpp.build``) and SmolLM2's GGUF (``rtrl models fetch smollm2-135m``).
Figures to stdout and ``bench/out/llamacpp_servers.json``.
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
from _common import (  # noqa: E402
    format_table,
    machine,
    matmul_peak_gflops,
    quiet_port_block,
    reexec_in_venv,
    write_results,
)

reexec_in_venv(__file__)

import httpx  # noqa: E402
import torch  # noqa: E402

from infra.kafka_dist import default_cache_root  # noqa: E402
from llamacpp.build import server_binary  # noqa: E402
from llamacpp.fleet import threads_per_server  # noqa: E402
from llamacpp.server import EngineConfig, LlamaServer  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402

PROMPT = "<|im_start|>user\nWrite a Python function number {n} that reverses a list.<|im_end|>\n"


async def ask(url: str, requests: int, at_once: int, max_tokens: int) -> int:
    """``requests`` completions from one server, ``at_once`` in flight; the tokens decoded."""
    gate = asyncio.Semaphore(at_once)
    async with httpx.AsyncClient(timeout=900) as http:

        async def one(n: int) -> int:
            async with gate:
                body = {"prompt": PROMPT.format(n=n) + "<|im_start|>assistant\n",
                        "n_predict": max_tokens, "temperature": 0.7, "ignore_eos": True,
                        "seed": n}  # fmt: skip
                answer = await http.post(f"{url}/completion", json=body)
                answer.raise_for_status()
                return int(answer.json()["tokens_predicted"])

        return sum(await asyncio.gather(*(one(n) for n in range(requests))))


def model_params(url: str) -> int:
    """The served model's parameter count, as llama-server reports it."""
    answer = httpx.get(f"{url}/v1/models", timeout=30)
    answer.raise_for_status()
    return int(answer.json()["data"][0]["meta"]["n_params"])


def measure(binary: Path, gguf: Path, servers: int, threads: int, args: argparse.Namespace,
            log_dir: Path) -> tuple[int, float, int]:  # fmt: skip
    """Start ``servers`` servers of ``threads`` threads each, warm them, load them all at once;
    (tokens, seconds, the model's parameters)."""
    started: list[LlamaServer] = []
    try:
        for _ in range(servers):
            port = quiet_port_block(1)
            config = EngineConfig(binary, gguf, port, threads=threads, slots=args.slots)
            started.append(LlamaServer(config, log_dir / f"server-{port}.log"))
        for server in started:
            asyncio.run(ask(server.url, 2, 2, 8))

        async def all_at_once() -> list[int]:
            jobs = (ask(s.url, args.requests, args.slots, args.max_tokens) for s in started)
            return list(await asyncio.gather(*jobs))

        t0 = time.monotonic()
        tokens = sum(asyncio.run(all_at_once()))
        return tokens, time.monotonic() - t0, model_params(started[0].url)
    finally:
        for server in started:
            server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=2, help="servers running at once")
    ap.add_argument("--threads", type=int, default=2, help="the machine's threads for serving")
    ap.add_argument("--slots", type=int, default=16, help="each server's parallel slots")
    ap.add_argument("--requests", type=int, default=32, help="completions asked of each server")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument(
        "--gguf",
        type=Path,
        help="the model file served (default: SmolLM2's 4-bit "
        "GGUF; e.g. its float16 conversion, rtrl serve --engine-weights f16)",
    )
    args = ap.parse_args()
    binary = server_binary(default_cache_root(os.environ))
    if not binary.is_file():
        print(f"llama-server is not built at {binary}: python -m llamacpp.build")
        return 2
    gguf = args.gguf or fetch("smollm2-135m", models_dir())
    shared = threads_per_server(args.threads, args.servers)
    configs = [
        ("one server alone", 1, args.threads),
        (f"{args.servers} servers, {args.threads} threads each", args.servers, args.threads),
        (f"{args.servers} servers, threads divided ({shared} each)", args.servers, shared),
    ]
    torch.set_num_threads(args.threads)
    peak = matmul_peak_gflops()
    print(f"compute limit: a 2048x2048 float32 matmul at {peak:.1f} GFLOP/s "
          f"on {args.threads} threads")  # fmt: skip
    header = ["configuration", "requests", "tokens", "s", "tokens/s", "GFLOP/s", "of peak"]
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, servers, threads in configs:
            tokens, seconds, params = measure(binary, gguf, servers, threads, args, Path(tmp))
            gflops = 2 * params * tokens / seconds / 1e9  # 2N a decoded token, as MFU counts
            rows.append([name, servers * args.requests, tokens, round(seconds, 1),
                         round(tokens / seconds, 1), round(gflops, 1),
                         f"{gflops / peak:.0%}"])  # fmt: skip
            print(format_table(header, rows[-1:]))
    print()
    print(format_table(header, rows))
    runs = [dict(zip(["configuration", "requests", "tokens", "seconds", "tokens_per_s",
                      "gflops", "of_matmul_peak"], row, strict=True)) for row in rows]  # fmt: skip
    results = {"machine": machine(), "args": {**vars(args), "gguf": str(gguf)},
               "matmul_peak_gflops": peak, "model_params": params, "runs": runs}  # fmt: skip
    print(f"figures: {write_results('llamacpp_servers', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
