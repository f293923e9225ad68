#!/usr/bin/env python3
"""What `rtrl serve --upstream` adds in front of a backend: latency p50/p99 and requests/s,
through the gateway against the backend called directly, in the same run.

One broker (started here unless ``--bootstrap``), the tiny model, two `rtrl serve` processes:

* the backend: a local `rtrl serve` on the tiny model (``--no-record``: it stands as the
  upstream, as vLLM would), answering ``/v1/completions`` with ``--max-tokens`` tokens;
* the gateway: `rtrl serve --upstream <backend>`, which asks for token ids and log-probs,
  parses the answer, records each rollout on Kafka (acks=all) and answers.

Each row sends ``--requests`` completions from ``--concurrency`` concurrent clients (httpx,
asyncio, keep-alive) in this process. Direct and gateway requests alternate in ``--rounds``
slices, so that whatever else loads the machine weighs on both alike. Overhead = gateway
quantile minus direct quantile; ratio = gateway requests/s over direct requests/s. The
backend's sampling dominates both, so the figures say what the gateway adds to a fast backend;
a real vLLM backend is slower per request, which makes the relative overhead smaller.
Figures go to stdout and to ``bench/out/gateway_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    format_table,
    kafka,
    machine,
    quiet_port_block,
    reexec_in_venv,
    write_results,
)

reexec_in_venv(__file__)

import httpx  # noqa: E402

from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from ingest.collector.keys import KeyStore  # noqa: E402
from trainer.checkpoint_io import register_base  # noqa: E402
from trainer.registry import CheckpointRegistry  # noqa: E402
from trainer.tiny_model import ensure_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def serve(args: list[str], port: int, log: Path, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtrl.cli", "serve", "--port", str(port), *args],
        cwd=REPO,
        stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"rtrl serve did not start: {log.read_text()[-2000:]}")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(
    url: str, key: str, requests: int, concurrency: int, max_tokens: int, latencies: list[float]
) -> float:
    """Send ``requests`` completions from ``concurrency`` clients; returns the seconds taken
    and appends each request's latency."""
    body = {"model": "m", "prompt": "def mean(xs):", "max_tokens": max_tokens}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=url, limits=limits, timeout=60, headers={"Authorization": f"Bearer {key}"}
    ) as client:
        for _ in range(concurrency):  # connections opened before the clock starts
            (await client.post("/v1/completions", json=body)).raise_for_status()
        left = requests

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                started = time.perf_counter()
                answer = await client.post(
                    "/v1/completions",
                    json=body,
                    headers={"X-Rtrl-Interaction-Id": str(uuid.uuid4())},
                )
                latencies.append(time.perf_counter() - started)
                answer.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of a new one")
    parser.add_argument("--requests", type=int, default=1000, help="per row")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated client counts")
    parser.add_argument("--max-tokens", type=int, default=1, help="tokens per completion")
    parser.add_argument("--rounds", type=int, default=10, help="alternating slices per row")
    args = parser.parse_args()
    rows: list[dict] = []
    with kafka(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        names = TopicNames(f"bench-gw-{uuid.uuid4().hex[:6]}.")
        apply_topics(bootstrap, names, replication=1)
        registry = CheckpointRegistry(tmp / "ckpt")
        register_base(registry, "t-0000", ensure_tiny_model(tmp / "models"))
        store = KeyStore(tmp / "keys.sqlite")
        key = store.create("bench")
        store.close()
        common = [
            "--registry",
            str(registry.root),
            "--db",
            str(tmp / "keys.sqlite"),
            "--bootstrap",
            bootstrap,
            "--topic-prefix",
            names.prefix,
            "--no-follow",
            "--max-tokens",
            str(args.max_tokens),
        ]
        ports = quiet_port_block(2)
        backend = serve([*common, "--no-record"], ports, tmp / "backend.log", {})
        direct = f"http://127.0.0.1:{ports}"
        gateway = serve(
            [*common, "--upstream", direct, "--upstream-model", "base"],
            ports + 1,
            tmp / "gateway.log",
            {"RTRL_UPSTREAM_API_KEY": key},
        )
        via = f"http://127.0.0.1:{ports + 1}"
        try:
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                latencies: dict[str, list[float]] = {"direct": [], "gateway": []}
                seconds = {"direct": 0.0, "gateway": 0.0}
                for _ in range(args.rounds):
                    for name, url in (("direct", direct), ("gateway", via)):
                        seconds[name] += asyncio.run(
                            load(
                                url,
                                key,
                                args.requests // args.rounds,
                                concurrency,
                                args.max_tokens,
                                latencies[name],
                            )
                        )
                figures = {
                    name: {
                        "requests": len(latencies[name]),
                        "rps": len(latencies[name]) / seconds[name],
                        "p50_ms": 1000 * quantile(latencies[name], 0.5),
                        "p99_ms": 1000 * quantile(latencies[name], 0.99),
                    }
                    for name in latencies
                }
                rows.append(
                    {
                        "row": f"direct, {concurrency} client(s)",
                        "concurrency": concurrency,
                        **figures["direct"],
                    }
                )
                rows.append(
                    {
                        "row": f"gateway, {concurrency} client(s)",
                        "concurrency": concurrency,
                        **figures["gateway"],
                        "added_p50_ms": figures["gateway"]["p50_ms"] - figures["direct"]["p50_ms"],
                        "added_p99_ms": figures["gateway"]["p99_ms"] - figures["direct"]["p99_ms"],
                        "throughput_ratio": figures["gateway"]["rps"] / figures["direct"]["rps"],
                    }
                )
        finally:
            for proc in (gateway, backend):
                proc.terminate()
                proc.wait(60)
    print(
        format_table(
            [
                "row",
                "requests",
                "req/s",
                "p50 ms",
                "p99 ms",
                "added p50 ms",
                "added p99 ms",
                "ratio",
            ],
            [
                [
                    r["row"],
                    r["requests"],
                    r["rps"],
                    r["p50_ms"],
                    r["p99_ms"],
                    r.get("added_p50_ms", "-"),
                    r.get("added_p99_ms", "-"),
                    r.get("throughput_ratio", "-"),
                ]
                for r in rows
            ],
        )
    )
    path = write_results(
        "gateway_bench",
        {
            "benchmark": "gateway_bench",
            "machine": machine(),
            "max_tokens": args.max_tokens,
            "rows": rows,
        },
    )
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
