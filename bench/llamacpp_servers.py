#!/usr/bin/env python3
"""Several llama-servers on one machine, as the closing A/B and a canary run them (one server a
checkpoint): completion tokens/s of all of them together, with each taking every thread, and with
the threads divided among them (``llamacpp.fleet.threads_per_server``), beside one
server alone on the same cores; each beside a float32 matmul's GFLOP/s measured in the same run
(the machine's compute limit), counting 2N model FLOPs a decoded token as MFU does.

    python bench/llamacpp_servers.py [--servers 2] [--threads 2] [--slots 16] [--requests 32]
    python bench/llamacpp_servers.py --adapters   # an A/B's arms: LoRA adapters of one base

With ``--adapters``, each of ``--servers`` checkpoints is a seeded LoRA adapter of the base (as
an A/B's arms are), served as ``rtrl serve --engine llama.cpp`` serves them: one server each
applying its adapter, threads divided (``--no-engine-share-base``), against one server that
loaded them all, every request naming its own (``share_base``, ``llamacpp.fleet.start_shared``).

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
from typing import Any

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
from llamacpp.fleet import adapter_scales, threads_per_server  # noqa: E402
from llamacpp.server import EngineConfig, LlamaServer  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402

PROMPT = "<|im_start|>user\nWrite a Python function number {n} that reverses a list.<|im_end|>\n"


async def ask(url: str, requests: int, at_once: int, max_tokens: int,
              lora: list[dict[str, float]] | None = None) -> int:  # fmt: skip
    """``requests`` completions from one server, ``at_once`` in flight, each naming ``lora``
    when given; the tokens decoded."""
    gate = asyncio.Semaphore(at_once)
    async with httpx.AsyncClient(timeout=900) as http:

        async def one(n: int) -> int:
            async with gate:
                body = {"prompt": PROMPT.format(n=n) + "<|im_start|>assistant\n",
                        "n_predict": max_tokens, "temperature": 0.7, "ignore_eos": True,
                        "seed": n} | ({} if lora is None else {"lora": lora})  # fmt: skip
                answer = await http.post(f"{url}/completion", json=body)
                answer.raise_for_status()
                return int(answer.json()["tokens_predicted"])

        return sum(await asyncio.gather(*(one(n) for n in range(requests))))


def model_params(url: str) -> int:
    """The served model's parameter count, as llama-server reports it."""
    answer = httpx.get(f"{url}/v1/models", timeout=30)
    answer.raise_for_status()
    return int(answer.json()["data"][0]["meta"]["n_params"])


Job = tuple[int, list[dict[str, float]] | None]  # a server's index, the requests' lora field


def measure(binary: Path, gguf: Path, servers: list[dict[str, Any]], jobs: list[Job],
            args: argparse.Namespace, log_dir: Path) -> tuple[int, float, int]:  # fmt: skip
    """Start a server for each of ``servers`` (``EngineConfig`` fields beside the model), warm
    each job's server, then run every job at once (``--requests`` completions each);
    (tokens, seconds, the model's parameters)."""
    started: list[LlamaServer] = []
    try:
        for fields in servers:
            port = quiet_port_block(1)
            config = EngineConfig(binary, gguf, port, slots=args.slots, **fields)
            started.append(LlamaServer(config, log_dir / f"server-{port}.log"))
        for index, lora in jobs:
            asyncio.run(ask(started[index].url, 2, 2, 8, lora))

        async def all_at_once() -> list[int]:
            return list(await asyncio.gather(*(
                ask(started[i].url, args.requests, args.slots, args.max_tokens, lora)
                for i, lora in jobs
            )))  # fmt: skip

        t0 = time.monotonic()
        tokens = sum(asyncio.run(all_at_once()))
        return tokens, time.monotonic() - t0, model_params(started[0].url)
    finally:
        for server in started:
            server.stop()


def plain_configs(args: argparse.Namespace) -> list[tuple[str, list[dict[str, Any]], list[Job]]]:
    """The base on one server, on several each with every thread, and with threads divided."""
    n, shared = args.servers, threads_per_server(args.threads, args.servers)
    each: list[dict[str, Any]] = [{"threads": args.threads}] * n
    divided: list[dict[str, Any]] = [{"threads": shared}] * n
    jobs: list[Job] = [(i, None) for i in range(n)]
    return [
        ("one server alone", each[:1], jobs[:1]),
        (f"{n} servers, {args.threads} threads each", each, jobs),
        (f"{n} servers, threads divided ({shared} each)", divided, jobs),
    ]


def adapter_configs(args: argparse.Namespace, gguf: Path,
                    out: Path) -> list[tuple[str, list[dict[str, Any]], list[Job]]]:  # fmt: skip
    """``--servers`` seeded LoRA adapters of the base, served one server each (threads divided)
    and all by one server (every thread, the adapter chosen per request)."""
    adapters = seeded_adapters(gguf, args.servers, out)
    n, shared = len(adapters), threads_per_server(args.threads, len(adapters))
    names = tuple(str(i) for i in range(n))
    return [
        (f"{n} arms, a server each ({shared} threads each)",
         [{"threads": shared, "lora": a} for a in adapters], [(i, None) for i in range(n)]),
        (f"{n} arms, one server ({args.threads} threads, adapter per request)",
         [{"threads": args.threads, "adapters": tuple(adapters)}],
         [(0, adapter_scales(names, name)) for name in names]),
    ]  # fmt: skip


def seeded_adapters(gguf: Path, count: int, out: Path) -> list[Path]:
    """``count`` LoRA adapters of the base whose B matrices are seeded noise, as GGUF files."""
    from checkpoints.weights import model_ref
    from llamacpp.convert import candidate_lora_gguf
    from models.loading import LoraSettings, adapter_state, load_base, with_lora

    base = load_base(gguf)
    settings = LoraSettings(r=8, alpha=16, targets=("q_proj", "v_proj"))
    paths = []
    adapted = with_lora(base.model, settings)
    for seed in range(count):
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in adapted.named_parameters():
                if "lora_B" in name:
                    p.copy_(0.1 * torch.randn(p.shape, generator=generator))
        state = adapter_state(adapted)
        paths.append(candidate_lora_gguf(state, settings, model_ref(base),
                                         default_cache_root(os.environ), out))  # fmt: skip
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=2, help="servers running at once")
    ap.add_argument("--threads", type=int, default=2, help="the machine's threads for serving")
    ap.add_argument("--slots", type=int, default=16, help="each server's parallel slots")
    ap.add_argument("--requests", type=int, default=32, help="completions asked of each server")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--adapters", action="store_true",
                    help="serve seeded LoRA adapters of the base (an A/B's arms): a server each "
                    "against one server choosing the adapter per request")  # fmt: skip
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
    torch.set_num_threads(args.threads)
    peak = matmul_peak_gflops()
    print(f"compute limit: a 2048x2048 float32 matmul at {peak:.1f} GFLOP/s "
          f"on {args.threads} threads")  # fmt: skip
    header = ["configuration", "requests", "tokens", "s", "tokens/s", "GFLOP/s", "of peak"]
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        configs = adapter_configs(args, gguf, Path(tmp)) if args.adapters else plain_configs(args)
        for name, servers, jobs in configs:
            tokens, seconds, params = measure(binary, gguf, servers, jobs, args, Path(tmp))
            gflops = 2 * params * tokens / seconds / 1e9  # 2N a decoded token, as MFU counts
            rows.append([name, len(jobs) * args.requests, tokens, round(seconds, 1),
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
