#!/usr/bin/env python3
"""Serving a checkpoint per organisation on llama.cpp: total completion tokens/s with 2, 4 and 8
organisations' LoRA adapters of one base, against the base alone measured in the same run.

Two layouts, as ``rtrl serve --engine llama.cpp`` can run them: a server per organisation
(threads divided among them, ``llamacpp.fleet.threads_per_server``), and one server that loaded
every adapter and applies each request's own (``--engine-share-base``). Two mixes of traffic:
uniform (each organisation an equal share of the requests) and size-weighted (organisation i's
share proportional to 1/(i+1), as a few large organisations beside small ones send). Held equal
in every configuration: the requests in flight (``--in-flight`` clients in all, each taking the
next request of a shuffled queue and sending it to its organisation's server or adapter), the
answer length (``--max-tokens``, ``ignore_eos``), the weight file and the machine's threads.
Reported: tokens/s and its share of the base's, each request's latency (mean, p50, p95), and the
servers' resident memory together after the run.

    python bench/org_serving.py [--orgs 2 4 8] [--requests 64] [--in-flight 16] [--poll 0]
                                [--layout each|shared|both] [--mixes uniform weighted]
                                [--threads-each 2 1]

Needs the built server (``python -m llamacpp.build``) and SmolLM2's GGUF (``rtrl models fetch
smollm2-135m``). Figures to stdout and ``bench/out/org_serving.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    format_table,
    machine,
    quiet_port_block,
    reexec_in_venv,
    write_results,
)

reexec_in_venv(__file__)

import httpx  # noqa: E402
from llamacpp_servers import seeded_adapters  # noqa: E402

from infra.kafka_dist import default_cache_root  # noqa: E402
from llamacpp.build import server_binary  # noqa: E402
from llamacpp.fleet import adapter_scales, threads_per_server  # noqa: E402
from llamacpp.server import EngineConfig, LlamaServer  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402

PROMPT = "<|im_start|>user\nWrite a Python function number {n} that reverses a list.<|im_end|>\n"


@dataclass(frozen=True)
class Target:
    """Where one organisation's requests go: a server, and the ``lora`` field they carry."""

    server: int
    lora: list[dict[str, float]] | None


def shares(orgs: int, mix: str) -> list[float]:
    """Each organisation's share of the requests.

    >>> shares(2, "uniform"), [round(s, 3) for s in shares(3, "weighted")]
    ([0.5, 0.5], [0.545, 0.273, 0.182])
    """
    raw = [1.0] * orgs if mix == "uniform" else [1 / (i + 1) for i in range(orgs)]
    return [w / sum(raw) for w in raw]


def request_orgs(requests: int, weights: list[float], seed: int = 0) -> list[int]:
    """The organisation of each request, in a shuffled order: each organisation's count its
    share of ``requests`` (rounded, at least one each)."""
    counts = [max(1, round(requests * w)) for w in weights]
    order = [org for org, count in enumerate(counts) for _ in range(count)]
    random.Random(seed).shuffle(order)
    return order


Route = Callable[[int, list[int]], Target]
"""Where a request of an organisation goes, given each server's requests in flight."""


def fixed(targets: list[Target]) -> Route:
    """Each organisation's requests to its own target, however busy the servers are."""
    return lambda org, _busy: targets[org]


async def drive(urls: list[str], route: Route, orgs: list[int], in_flight: int,
                max_tokens: int) -> tuple[int, list[float]]:  # fmt: skip
    """Every request of ``orgs`` sent by ``in_flight`` clients, each where ``route`` says;
    (tokens, each latency in s)."""
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    for n, org in enumerate(orgs):
        queue.put_nowait((n, org))
    busy = [0] * len(urls)
    tokens, latencies = 0, []
    async with httpx.AsyncClient(timeout=900) as http:

        async def client() -> None:
            nonlocal tokens
            while not queue.empty():
                n, org = queue.get_nowait()
                target = route(org, busy)
                body = {"prompt": PROMPT.format(n=n) + "<|im_start|>assistant\n",
                        "n_predict": max_tokens, "temperature": 0.7, "ignore_eos": True,
                        "seed": n}  # fmt: skip
                if target.lora is not None:
                    body["lora"] = target.lora
                busy[target.server] += 1
                t0 = time.monotonic()
                answer = await http.post(f"{urls[target.server]}/completion", json=body)
                answer.raise_for_status()
                latencies.append(time.monotonic() - t0)
                busy[target.server] -= 1
                tokens += int(answer.json()["tokens_predicted"])

        await asyncio.gather(*(client() for _ in range(in_flight)))
    return tokens, latencies


def rss_mib(servers: list[LlamaServer]) -> float:
    """The servers' resident memory together (VmRSS), MiB."""
    total = 0
    for server in servers:
        for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def layouts(adapters: list[Path], args: argparse.Namespace
            ) -> dict[str, tuple[list[dict[str, Any]], list[Target]]]:  # fmt: skip
    """Each layout's servers (``EngineConfig`` fields beside the model) and where each
    organisation's requests go."""
    n, threads, fields = len(adapters), args.threads, {"slots": args.in_flight, "poll": args.poll}
    names = tuple(str(i) for i in range(n))
    even = [threads_per_server(threads, n)] * n
    each = even if args.threads_each is None else (args.threads_each + even)[:n]
    label = f"{each[0]} thread{'s' if each[0] > 1 else ''} each" if each == even else (
        "threads " + "/".join(map(str, each)))  # fmt: skip
    out = {
        f"a server each ({label})": (
            [{"threads": t, "lora": a, **fields} for t, a in zip(each, adapters, strict=True)],
            [Target(i, None) for i in range(n)],
        ),
        f"one server ({threads} threads, adapter per request)": (
            [{"threads": threads, "adapters": tuple(adapters), **fields}],
            [Target(0, adapter_scales(names, name)) for name in names],
        ),
    }
    keep = {"each": 0, "shared": 1, "both": None}[args.layout]
    return out if keep is None else dict([list(out.items())[keep]])


def measure(binary: Path, gguf: Path, servers: list[dict[str, Any]], targets: list[Target],
            orgs: list[int], args: argparse.Namespace,
            log_dir: Path) -> dict[str, Any]:  # fmt: skip
    started: list[LlamaServer] = []
    try:
        for fields in servers:
            port = quiet_port_block(1)
            started.append(LlamaServer(EngineConfig(binary, gguf, port, **fields),
                                       log_dir / f"server-{port}.log"))  # fmt: skip
        urls = [s.url for s in started]
        warm = sorted(set(orgs))
        asyncio.run(drive(urls, fixed(targets), warm, len(warm), 4))  # every target once
        t0 = time.monotonic()
        tokens, latencies = asyncio.run(drive(urls, fixed(targets), orgs, args.in_flight,
                                              args.max_tokens))  # fmt: skip
        seconds = time.monotonic() - t0
        cut = statistics.quantiles(latencies, n=20)
        return {"requests": len(orgs), "tokens": tokens, "seconds": round(seconds, 1),
                "tokens_per_s": round(tokens / seconds, 1),
                "latency_mean_s": round(statistics.fmean(latencies), 2),
                "latency_p50_s": round(statistics.median(latencies), 2),
                "latency_p95_s": round(cut[18], 2), "rss_mib": round(rss_mib(started))}  # fmt: skip
    finally:
        for server in started:
            server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orgs", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--threads", type=int, default=2, help="the machine's threads for serving")
    ap.add_argument("--in-flight", type=int, default=16, help="requests in flight, in all")
    ap.add_argument("--requests", type=int, default=64, help="completions in each configuration")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument(
        "--poll",
        type=int,
        help="llama-server's --poll for every server (0: idle "
        "threads sleep instead of spinning; default: llama.cpp's 50)",
    )
    ap.add_argument(
        "--threads-each",
        type=int,
        nargs="+",
        help="threads of each organisation's server in a server each, largest first (default: "
        "--threads divided evenly; more than --threads in all oversubscribes the cores)",
    )
    ap.add_argument("--layout", choices=("each", "shared", "both"), default="both")
    ap.add_argument("--mixes", nargs="+", default=["uniform", "weighted"])
    args = ap.parse_args()
    binary = server_binary(default_cache_root(os.environ))
    if not binary.is_file():
        print(f"llama-server is not built at {binary}: python -m llamacpp.build")
        return 2
    gguf = fetch("smollm2-135m", models_dir())
    header = ["organisations", "mix", "layout", "tokens/s", "of base", "latency mean s",
              "p50 s", "p95 s", "memory MiB"]  # fmt: skip
    rows: list[list[object]] = []
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        adapters = seeded_adapters(gguf, max(args.orgs), Path(tmp))
        base_fields = [{"threads": args.threads, "slots": args.in_flight, "poll": args.poll}]
        base = measure(binary, gguf, base_fields, [Target(0, None)],
                       [0] * args.requests, args, Path(tmp))  # fmt: skip
        runs.append({"orgs": 0, "mix": "-", "layout": "the base alone", **base})
        rows.append(["base alone", "-", f"one server ({args.threads} threads)",
                     base["tokens_per_s"], "1.00", base["latency_mean_s"], base["latency_p50_s"],
                     base["latency_p95_s"], base["rss_mib"]])  # fmt: skip
        print(format_table(header, rows[-1:]), flush=True)
        for n in args.orgs:
            for mix in args.mixes:
                orgs = request_orgs(args.requests, shares(n, mix))
                for layout, (servers, targets) in layouts(adapters[:n], args).items():
                    got = measure(binary, gguf, servers, targets, orgs, args, Path(tmp))
                    ratio = got["tokens_per_s"] / base["tokens_per_s"]
                    runs.append({"orgs": n, "mix": mix, "layout": layout,
                                 "of_base": round(ratio, 3), **got})  # fmt: skip
                    rows.append([n, mix, layout, got["tokens_per_s"], f"{ratio:.2f}",
                                 got["latency_mean_s"], got["latency_p50_s"],
                                 got["latency_p95_s"], got["rss_mib"]])  # fmt: skip
                    print(format_table(header, rows[-1:]), flush=True)
    print()
    print(format_table(header, rows))
    results = {"machine": machine(), "args": vars(args), "runs": runs}
    print(f"figures: {write_results('org_serving', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
