#!/usr/bin/env python3
"""The gateway's upstream client (``infra.http_client``) against its peer, aiohttp: CPU and wall
time per request from the client's side, in the same run.

A uvicorn server on the platform's settings (``infra.http_server``), in its own process on core
``--cpus``' first, answers every POST with a fixed completion body, as an upstream would. This
process, on the second core, on uvloop as the gateway runs, sends ``--requests`` POSTs per row
from ``--concurrency`` concurrent callers over kept-alive connections, with each client in turn
for ``--rounds`` slices. CPU per request is this process's user + system time (it has one
thread), which is what the gateway pays on every completion; wall per request is the row's
time over its requests. Figures go to stdout and to ``bench/out/http_client_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, quiet_port_block, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import aiohttp  # noqa: E402
import httpx  # noqa: E402
import uvloop  # noqa: E402

from infra.http_client import HttpPool  # noqa: E402
from infra.http_server import http_server  # noqa: E402

ANSWER = (
    b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"base","choices":[{"index":0,'
    b'"text":" a","logprobs":{"tokens":[" a"],"token_logprobs":[-1.2],"text_offset":[0]},'
    b'"finish_reason":"length","token_ids":[12],"prompt_token_ids":[1,2,3,4,5]}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}'
)
BODY = b'{"model":"base","prompt":"def mean(xs):","max_tokens":1,"logprobs":0}'
HEADERS = {"Authorization": "Bearer k", "Content-Type": "application/json"}
Post = Callable[[], Awaitable[int]]


async def upstream(scope: dict, receive, send) -> None:  # noqa: ANN001
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(ANSWER))]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": ANSWER})


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def lean(url: str, concurrency: int) -> tuple[Post, Callable[[], Awaitable[None]]]:
    pool = HttpPool(url, HEADERS, max_connections=concurrency)

    async def post() -> int:
        return (await pool.post("/v1/completions", BODY)).status

    return post, pool.close


async def peer(url: str, concurrency: int) -> tuple[Post, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency, ttl_dns_cache=None),
        headers=HEADERS,
        skip_auto_headers=("User-Agent",),
    )

    async def post() -> int:
        async with session.post(url + "/v1/completions", data=BODY) as answer:
            await answer.read()
            return answer.status

    return post, session.close


CLIENTS = {"infra.http_client": lean, "aiohttp (peer)": peer}


async def row_slice(client: str, url: str, requests: int, concurrency: int) -> tuple[float, float]:
    """CPU and wall seconds for ``requests`` POSTs from ``concurrency`` callers."""
    post, close = await CLIENTS[client](url, concurrency)
    try:
        await asyncio.gather(*(post() for _ in range(concurrency)))  # connections opened
        left = requests

        async def caller() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                if await post() != 200:
                    raise RuntimeError(f"{client}: not a 200")

        cpu, wall = cpu_s(), time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        return cpu_s() - cpu, time.perf_counter() - wall
    finally:
        await close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000, help="per row")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated caller counts")
    parser.add_argument("--rounds", type=int, default=6, help="alternating slices per row")
    parser.add_argument(
        "--cpus",
        default="0,1" if len(os.sched_getaffinity(0)) >= 2 else "",
        help="SERVER,CLIENT cores ('' to leave both unpinned)",
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server's own process
    args = parser.parse_args()
    if args.serve:
        http_server(upstream, "127.0.0.1", args.serve).run()
        return 0
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else [None, None]
    port = quiet_port_block(1)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)],
        preexec_fn=None if cpus[0] is None else lambda: os.sched_setaffinity(0, {cpus[0]}),
    )
    url = f"http://127.0.0.1:{port}"
    rows: list[dict] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(url, content=b"", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        if cpus[1] is not None:
            os.sched_setaffinity(0, {cpus[1]})
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            spent = {client: [0.0, 0.0] for client in CLIENTS}
            for _ in range(args.rounds):
                for client in CLIENTS:
                    cpu, wall = uvloop.run(
                        row_slice(client, url, args.requests // args.rounds, concurrency)
                    )
                    spent[client][0] += cpu
                    spent[client][1] += wall
            n = args.requests // args.rounds * args.rounds
            lean_cpu = spent["infra.http_client"][0]
            for client, (cpu, wall) in spent.items():
                rows.append({"client": client, "concurrency": concurrency, "requests": n,
                             "cpu_ms": 1000 * cpu / n, "wall_ms": 1000 * wall / n,
                             "cpu_vs_ours": cpu / lean_cpu})  # fmt: skip
    finally:
        server.terminate()
        server.wait(30)
    print(
        format_table(
            ["client", "callers", "requests", "CPU ms/req", "wall ms/req", "CPU vs ours"],
            [
                [
                    r["client"],
                    r["concurrency"],
                    r["requests"],
                    r["cpu_ms"],
                    r["wall_ms"],
                    r["cpu_vs_ours"],
                ]
                for r in rows
            ],  # fmt: skip
        )
    )
    path = write_results(
        "http_client_bench",
        {"benchmark": "http_client_bench", "machine": machine(), "cpus": cpus, "rows": rows},
    )
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
