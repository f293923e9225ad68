#!/usr/bin/env python3
"""What `rtrl serve --upstream` adds in front of a backend: latency p50/p99 and requests/s,
through the gateway against the backend called directly, in the same run, beside the least any
Python gateway on the same HTTP stack adds (a pass-through proxy).

One broker (started here unless ``--bootstrap``), the tiny model, three servers:

* the backend: a local `rtrl serve` on the tiny model (``--no-record``: it stands as the
  upstream, as vLLM would), answering ``/v1/completions`` with ``--max-tokens`` tokens;
* the gateway: `rtrl serve --upstream <backend>`, which asks for token ids and log-probs,
  parses the answer, records each rollout on Kafka (acks=all) and answers;
* the peer: ``bench/_passthrough.py``, which forwards each body unread and answers with what
  came back, on the same uvicorn settings and aiohttp pool as the gateway (the floor).

Each row sends ``--requests`` completions from ``--concurrency`` concurrent clients (asyncio,
keep-alive) in this process, on the gateway's own lean client (``infra.http_client``) unless
``--client aiohttp``: the load generator shares the gateway's core, and aiohttp's ~0.3 ms of
CPU a request there was taken from the gateway in every burst of answers, which a client on
another machine would not take. Direct and gateway requests alternate in ``--rounds``
slices, so that whatever else loads the machine weighs on all alike. ``--cpus B,G`` pins the
backend to core B (with one torch thread) and the gateway and the peer to core G, and this
process to G as well: the gateway's core is the one idle while the backend samples, so that
gateway and backend never take CPU from each other (other work on the machine still can: its
load average is in the figures). Overhead = the proxy's quantile minus the direct quantile;
ratio = its requests/s over direct requests/s; CPU per
request = each server process's user + system time over the row's slices (all its threads),
which scheduling delays on a loaded machine do not inflate as they do latencies. The
backend's sampling dominates both, so the figures say what the gateway adds to a fast backend;
a real vLLM backend is slower per request, which makes the relative overhead smaller.
Figures go to stdout and to ``bench/out/gateway_bench.json``.

``--tools`` asks ``/v1/chat/completions`` instead, as an agent does: two tools and a history
with an earlier call and its result, which the gateway recognises against the answers it
remembers and digests, and whose answer it reads for calls. With ``--upstream-tools pass`` (the
gateway's default) every server gets the same body and the backend renders the tools itself;
with ``render`` the gateway renders them into the default tool format (``models.tool_format``)
and the backend and the peer get the same rendered messages without tools. Either way the
backend samples the same prompt, so the difference is what tool calling adds at the gateway.
``--endpoint chat`` without ``--tools`` is the same chat without tools, for the figure beside
it.
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
from _gateway_load import CLIENTS, load, quantile, request_body  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import register_base  # noqa: E402
from infra.api_keys import KeyStore  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from models.tiny_model import ensure_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def serve(args: list[str], port: int, log: Path, env: dict[str, str],
          cpu: int | None) -> subprocess.Popen:  # fmt: skip
    """`rtrl serve ARGS` on ``port``, on core ``cpu`` alone when given."""
    command = [sys.executable, "-m", "rtrl.cli", "serve", "--port", str(port), *args]
    return start(command, port, log, env, cpu)


def start(command: list[str], port: int, log: Path, env: dict[str, str],
          cpu: int | None) -> subprocess.Popen:  # fmt: skip
    """``command``, on core ``cpu`` alone when given, once ``/readyz`` answers on ``port``."""
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
        preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{command[1:4]} did not start: {log.read_text()[-2000:]}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of a new one")
    parser.add_argument("--requests", type=int, default=1000, help="per row")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated client counts")
    parser.add_argument("--max-tokens", type=int, default=1, help="tokens per completion")
    parser.add_argument("--rounds", type=int, default=10, help="alternating slices per row")
    parser.add_argument(
        "--endpoint", choices=("completions", "chat"), default="completions", help="which API"
    )
    parser.add_argument(
        "--tools",
        action="store_true",
        help="chat with tools and a history of calls (implies --endpoint chat)",
    )
    parser.add_argument(
        "--client", choices=sorted(CLIENTS), default="lean", help="the load generator's client"
    )
    parser.add_argument(
        "--cpus",
        default="0,1" if len(os.sched_getaffinity(0)) >= 2 else "",
        help="BACKEND,GATEWAY cores ('' to leave every process unpinned)",
    )
    parser.add_argument(
        "--upstream-tools",
        choices=("pass", "render"),
        default="pass",
        help="how the gateway gives the backend the tools (rtrl serve --upstream-tools)",
    )
    args = parser.parse_args()
    if args.tools:
        args.endpoint = "chat"
    api_path = "/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions"
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else [None, None]
    load_before = os.getloadavg()
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
            "--key-db",
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
        threads = {"OMP_NUM_THREADS": "1"} if cpus[0] is not None else {}
        backend = serve([*common, "--no-record"], ports, tmp / "backend.log", threads, cpus[0])
        direct = f"http://127.0.0.1:{ports}"
        gateway = serve(
            [
                *common,
                "--upstream",
                direct,
                "--upstream-model",
                "default",
                "--upstream-tools",
                args.upstream_tools,
            ],  # fmt: skip
            ports + 1,
            tmp / "gateway.log",
            {"RTRL_UPSTREAM_API_KEY": key},
            cpus[1],
        )
        peer = start(
            [sys.executable, str(REPO / "bench" / "_passthrough.py"), direct, str(ports + 2)],
            ports + 2,
            tmp / "passthrough.log",
            {},
            cpus[1],
        )
        servers = {
            "direct": (direct, backend),
            "pass-through": (f"http://127.0.0.1:{ports + 2}", peer),
            "gateway": (f"http://127.0.0.1:{ports + 1}", gateway),
        }
        if cpus[1] is not None:  # the load generator beside the gateway (see the docstring)
            os.sched_setaffinity(0, {cpus[1]})
        try:
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                latencies: dict[str, list[float]] = {name: [] for name in servers}
                seconds = dict.fromkeys(servers, 0.0)
                cpu = {name: [0.0, 0.0] for name in servers}  # backend, proxy CPU s
                for _ in range(args.rounds):
                    for name, (url, proc) in servers.items():
                        before = cpu_seconds(backend.pid), cpu_seconds(proc.pid)
                        seconds[name] += asyncio.run(
                            load(
                                url,
                                key,
                                args.requests // args.rounds,
                                concurrency,
                                args.max_tokens,
                                latencies[name],
                                args.client,
                                request_body(
                                    args.endpoint,
                                    args.tools,
                                    args.max_tokens,
                                    args.upstream_tools == "render" and name != "gateway",
                                ),
                                api_path,
                            )
                        )
                        cpu[name][0] += cpu_seconds(backend.pid) - before[0]
                        cpu[name][1] += cpu_seconds(proc.pid) - before[1]
                figures = {
                    name: {
                        "requests": len(latencies[name]),
                        "rps": len(latencies[name]) / seconds[name],
                        "backend_cpu_ms": 1000 * cpu[name][0] / len(latencies[name]),
                        "proxy_cpu_ms": 1000 * cpu[name][1] / len(latencies[name]),
                        "p50_ms": 1000 * quantile(latencies[name], 0.5),
                        "p99_ms": 1000 * quantile(latencies[name], 0.99),
                    }
                    for name in latencies
                }
                base = figures["direct"]
                for name, fig in figures.items():
                    row = {"row": f"{name}, {concurrency} client(s)", "server": name,
                           "concurrency": concurrency, **fig}  # fmt: skip
                    if name != "direct":
                        row["added_p50_ms"] = fig["p50_ms"] - base["p50_ms"]
                        row["added_p99_ms"] = fig["p99_ms"] - base["p99_ms"]
                        row["throughput_ratio"] = fig["rps"] / base["rps"]
                    rows.append(row)
        finally:
            for proc in (peer, gateway, backend):
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
                "backend CPU ms/req",
                "proxy CPU ms/req",
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
                    r["backend_cpu_ms"],
                    r["proxy_cpu_ms"] if r["server"] != "direct" else "-",
                ]
                for r in rows
            ],
        )
    )
    path = write_results(
        "gateway_bench_tools"
        if args.tools
        else f"gateway_bench_{args.endpoint}"
        if args.endpoint == "chat"
        else "gateway_bench",
        {
            "benchmark": "gateway_bench",
            "machine": machine(),
            "max_tokens": args.max_tokens,
            "endpoint": args.endpoint,
            "tools": args.tools,
            "upstream_tools": args.upstream_tools,
            "client": args.client,
            "cpus": {"backend": cpus[0], "gateway_and_load": cpus[1]},
            "load_avg_before": load_before,
            "load_avg_after": os.getloadavg(),
            "rows": rows,
        },
    )
    said = [" ".join(f"{x:.2f}" for x in xs) for xs in (load_before, os.getloadavg())]
    print(f"load average (1, 5, 15 min): before {said[0]}, after {said[1]}")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
