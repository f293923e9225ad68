#!/usr/bin/env python3
"""Spill routing for two organisations' adapters on llama.cpp: a design measured and not kept.

``bench/org_serving.py`` found a server each at 0.72 of the base under size-weighted traffic
(two thirds of the requests for one organisation): the small organisation's server idles while
the large one's queues. Here both servers load both adapters (one thread each, as a server
each), a request goes to its organisation's own server unless that server has more than
``--slack`` requests in flight beyond the least loaded one, which then takes it with the
request's own ``lora`` field. The base alone, on one server with both threads, is measured
first in the same run; 16 requests in flight, 64 tokens each, as in ``org_serving.py``.

    python bench/org_serving_spill.py [--requests 64] [--slack 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import quiet_port_block, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from llamacpp_servers import seeded_adapters  # noqa: E402
from org_serving import Route, Target, drive, measure, request_orgs, shares  # noqa: E402

from infra.kafka_dist import default_cache_root  # noqa: E402
from llamacpp.build import server_binary  # noqa: E402
from llamacpp.fleet import adapter_scales  # noqa: E402
from llamacpp.server import EngineConfig, LlamaServer  # noqa: E402
from models.catalog import fetch, models_dir  # noqa: E402

NAMES = ("0", "1")


def spill(slack: int, spilled: list[int]) -> Route:
    """Each organisation's requests to its own server unless that one has more than ``slack``
    in flight beyond the least busy, which then takes them; each spill appended to
    ``spilled``."""

    def route(org: int, busy: list[int]) -> Target:
        home = org % len(busy)
        least = min(range(len(busy)), key=lambda s: busy[s])
        server = home if busy[home] <= busy[least] + slack else least
        if server != home:
            spilled.append(org)
        return Target(server, adapter_scales(NAMES, NAMES[org]))

    return route


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--slack", type=int, default=2, help="requests in flight before a spill")
    args = ap.parse_args()
    args.in_flight, args.max_tokens = 16, 64
    binary, gguf = (
        server_binary(default_cache_root(os.environ)),
        fetch("smollm2-135m", models_dir()),
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        adapters = tuple(seeded_adapters(gguf, 2, Path(tmp)))
        base_fields = [{"threads": 2, "slots": 16, "poll": None}]
        base = measure(binary, gguf, base_fields, [Target(0, None)], [0] * args.requests, args,
                       Path(tmp))["tokens_per_s"]  # fmt: skip
        print(f"the base alone, one server (2 threads): {base} tokens/s", flush=True)
        for mix in ("weighted", "uniform"):
            servers = []
            try:
                for _ in NAMES:
                    port = quiet_port_block(1)
                    config = EngineConfig(
                        binary, gguf, port, threads=1, slots=16, adapters=adapters
                    )
                    servers.append(LlamaServer(config, Path(tmp) / f"server-{port}.log"))
                urls = [s.url for s in servers]
                asyncio.run(drive(urls, spill(len(urls), []), [0, 1], 2, 4))  # each once
                orgs = request_orgs(args.requests, shares(2, mix))
                t0 = time.monotonic()
                spills: list[int] = []
                tokens, latencies = asyncio.run(
                    drive(urls, spill(args.slack, spills), orgs, 16, 64)
                )
                spilled = len(spills)
                rate = tokens / (time.monotonic() - t0)
            finally:
                for server in servers:
                    server.stop()
            p95 = statistics.quantiles(latencies, n=20)[18]
            rows.append({"mix": mix, "tokens_per_s": round(rate, 1),
                         "of_base": round(rate / base, 3), "spilled": spilled,
                         "latency_p95_s": round(p95, 2)})  # fmt: skip
            print(f"{mix:<9} spill at {args.slack}: {rate:.1f} tokens/s, {rate / base:.2f} of "
                  f"the base, {spilled} of {len(orgs)} spilled, p95 {p95:.2f} s")  # fmt: skip
    print(f"figures: {write_results('org_serving_spill', {'base': base, 'rows': rows})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
