#!/usr/bin/env python3
"""Rollouts across a broker outage: `rtrl serve --spool-dir` under steady load while its only
Kafka broker is SIGKILLed for ``--outage-s`` (60 s), then started again.

Prints the completions answered, the rollouts written to the disk spool, delivered and lost
(limit 0: every answered completion's interaction id on the topic), duplicates, the time from
the broker's return until every rollout answered before it was delivered (drain), and the
answer rate during the outage beside the rate before it (limit: no lower than 0.9 of it).
First, the price of the disk spool when Kafka is up: the same load on two gateways in
alternating slices, one with ``--spool-dir`` (write-ahead, fsynced) and one without
(memory only), answer rate and gateway CPU per request side by side.

Load: ``--concurrency`` clients in this process, each sending the next completion
(``--max-tokens`` 1, the tiny model on the local backend) once the last was answered, each
under a new interaction id. Figures go to stdout and ``bench/out/rollout_outage_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, quiet_port_block, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import httpx  # noqa: E402
import orjson  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from gateway_bench import cpu_seconds, serve  # noqa: E402

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import register_base  # noqa: E402
from infra import broker  # noqa: E402
from infra.api_keys import KeyStore  # noqa: E402
from infra.broker_config import ClusterLayout  # noqa: E402
from infra.http_client import HttpPool  # noqa: E402
from infra.kafka_dist import default_cache_root  # noqa: E402
from infra.settings import client  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from models.tiny_model import ensure_tiny_model  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BODY = orjson.dumps({"model": "default", "prompt": "def mean(xs):", "max_tokens": 1})
RATE_LIMIT = 0.9  # answer rate during the outage over the rate before it, at least


class Load:
    """Closed-loop clients against one gateway; each answered interaction id with its time."""

    def __init__(self, url: str, key: str, concurrency: int) -> None:
        self.url, self.key, self.concurrency = url, key, concurrency
        self.answered: list[tuple[float, str]] = []
        self.failed = 0

    async def run_for(self, seconds: float, stop: asyncio.Event | None = None) -> None:
        pool = HttpPool(self.url, {"Authorization": f"Bearer {self.key}",
                                   "Content-Type": "application/json"},
                        max_connections=self.concurrency, timeout_s=60)  # fmt: skip
        deadline = time.monotonic() + seconds

        async def worker() -> None:
            while time.monotonic() < deadline and not (stop and stop.is_set()):
                interaction = str(uuid.uuid4())
                answer = await pool.post("/v1/completions", BODY,
                                         {"X-Rtrl-Interaction-Id": interaction})  # fmt: skip
                if answer.status == 200:
                    self.answered.append((time.monotonic(), interaction))
                else:
                    self.failed += 1

        try:
            await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        finally:
            await pool.close()

    def rate(self, start: float, end: float) -> float:
        return sum(1 for t, _ in self.answered if start <= t < end) / max(end - start, 1e-9)


def metrics(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def on_topic(bootstrap: str, topic: str) -> Counter[str]:
    """Messages per key: every message the topic holds (by its offsets), read back."""
    consumer = Consumer(client(bootstrap, **{"group.id": f"bench-{uuid.uuid4().hex}",
                                             "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False}))  # fmt: skip
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        held = sum(
            high - low
            for low, high in (
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in parts
            )
        )
        consumer.subscribe([topic])
        got: Counter[str] = Counter()
        deadline = time.monotonic() + 120
        while sum(got.values()) < held and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.5):
                key = m.key()
                if m.error() is None and key is not None:
                    got[key.decode()] += 1
        return got
    finally:
        consumer.close()


def steady_cost(gateways: dict[str, tuple[str, subprocess.Popen]], key: str, concurrency: int,
                seconds: float, slices: int) -> list[list[object]]:  # fmt: skip
    """Answer rate and CPU per request of each gateway, in alternating slices."""
    for url, _ in gateways.values():  # warmed up first: the first answers load lazily
        asyncio.run(Load(url, key, concurrency).run_for(2.0))
    answered = dict.fromkeys(gateways, 0)
    cpu = dict.fromkeys(gateways, 0.0)
    for _ in range(slices):
        for name, (url, proc) in gateways.items():
            load = Load(url, key, concurrency)
            before = cpu_seconds(proc.pid)
            asyncio.run(load.run_for(seconds / slices / len(gateways)))
            cpu[name] += cpu_seconds(proc.pid) - before
            answered[name] += len(load.answered)
    share = seconds / len(gateways)
    return [
        [name, round(answered[name] / share, 1), round(1000 * cpu[name] / max(n, 1), 3)]
        for name, n in answered.items()
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-s", type=float, default=60.0, help="broker down this long")
    parser.add_argument("--before-s", type=float, default=20.0, help="load before the outage")
    parser.add_argument("--after-s", type=float, default=20.0, help="load after the broker is back")
    parser.add_argument("--steady-s", type=float, default=30.0,
                        help="the disk spool's price with Kafka up (0: skip)")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent clients")
    args = parser.parse_args()
    parent = REPO / ".rtrl" / "bench"
    parent.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="outage-", dir=parent))
    layout = ClusterLayout(data / "kafka", port=quiet_port_block(2), nodes=1)
    cache = default_cache_root(os.environ)
    procs: list[subprocess.Popen] = []
    results: dict[str, object] = {"machine": machine(), "args": vars(args)}
    try:
        bootstrap = broker.start(layout, cache)
        names = TopicNames(f"bench-outage-{uuid.uuid4().hex[:6]}.")
        apply_topics(bootstrap, names, replication=1)
        registry = CheckpointRegistry(data / "ckpt")
        register_base(registry, "t-0000", ensure_tiny_model(data / "models"))
        store = KeyStore(data / "keys.sqlite")
        key = store.create("bench")
        store.close()
        common = ["--registry", str(registry.root), "--key-db", str(data / "keys.sqlite"),
                  "--bootstrap", bootstrap, "--topic-prefix", names.prefix, "--no-follow",
                  "--max-tokens", "1"]  # fmt: skip
        port = quiet_port_block(4)
        disk = serve([*common, "--spool-dir", str(data / "spool"), "--metrics-port",
                      str(port + 1)], port, data / "gateway.log", {}, None)  # fmt: skip
        procs.append(disk)
        url = f"http://127.0.0.1:{port}"
        if args.steady_s > 0:
            memory_names = TopicNames(f"bench-memory-{uuid.uuid4().hex[:6]}.")
            apply_topics(bootstrap, memory_names, replication=1)
            memory_args = [*common[:-5], "--topic-prefix", memory_names.prefix, *common[-3:]]
            memory = serve(memory_args, port + 2, data / "memory.log", {}, None)
            procs.append(memory)
            rows = steady_cost({"disk spool (fsync)": (url, disk),
                                "memory only": (f"http://127.0.0.1:{port + 2}", memory)},
                               key, args.concurrency, args.steady_s, 4)  # fmt: skip
            memory.terminate()
            memory.wait(60)
            print(format_table(["gateway, Kafka up", "answers/s", "gateway CPU ms/answer"],
                               rows))  # fmt: skip
            results["steady"] = rows
        load = Load(url, key, args.concurrency)
        written_before = metrics(port + 1).get("rtrl_gateway_spool_written_total", 0)
        marks: dict[str, float] = {}
        stop = asyncio.Event()

        async def outage() -> None:
            loop = asyncio.get_running_loop()
            running = asyncio.ensure_future(load.run_for(1e9, stop))
            marks["start"] = time.monotonic()
            await asyncio.sleep(args.before_s)
            marks["down"] = time.monotonic()
            await loop.run_in_executor(None, broker.kill_node, layout, 0)
            await asyncio.sleep(max(0.0, args.outage_s - (time.monotonic() - marks["down"])))
            marks["restarting"] = time.monotonic()
            await loop.run_in_executor(None, broker.start, layout, cache)
            marks["back"] = time.monotonic()
            owed = sum(1 for t, _ in load.answered if t < marks["back"])
            marks["owed"] = owed
            peak = 0.0
            while True:  # until every rollout answered before the broker's return is delivered
                counts = await loop.run_in_executor(None, metrics, port + 1)
                peak = max(peak, counts.get("rtrl_gateway_spool_disk_bytes", 0.0))
                if counts.get("rtrl_gateway_rollouts_delivered_total", 0) >= owed:
                    break
                await asyncio.sleep(0.2)
            marks["drained"] = time.monotonic()
            await asyncio.sleep(args.after_s)
            stop.set()
            await running
            marks["end"] = time.monotonic()

        asyncio.run(outage())
        answered = [i for _, i in load.answered]
        deadline = time.monotonic() + 120
        while metrics(port + 1).get("rtrl_gateway_rollouts_delivered_total", 0) < len(answered):
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        counts = metrics(port + 1)
        disk.terminate()
        disk.wait(60)
        got = on_topic(bootstrap, names.rollouts)
        lost = len(set(answered) - set(got))
        before = load.rate(marks["start"], marks["down"])
        during = load.rate(marks["down"], marks["restarting"])
        figures = {
            "answered": len(answered),
            "failed requests": load.failed,
            "spooled to disk": int(
                counts.get("rtrl_gateway_spool_written_total", 0) - written_before
            ),
            "answered during the outage": sum(
                1 for t, _ in load.answered if marks["down"] <= t < marks["back"]
            ),
            "delivered (unique ids on the topic)": len(set(got) & set(answered)),
            "lost (limit 0)": lost,
            "duplicates": sum(got.values()) - len(got),
            "dropped (by the gateway)": sum(
                v for k, v in counts.items() if k.startswith("rtrl_gateway_rollouts_dropped_total")
            ),
            "outage s (broker down to answering)": round(marks["back"] - marks["down"], 1),
            "drain s (broker back to all delivered)": round(marks["drained"] - marks["back"], 1),
            "answers/s before": round(before, 1),
            "answers/s during": round(during, 1),
            f"during / before (limit {RATE_LIMIT})": round(during / max(before, 1e-9), 3),
        }
        print(format_table(["figure", "value"], [[k, v] for k, v in figures.items()]))
        results["outage"] = figures
        path = write_results("rollout_outage_bench", results)
        print(f"written to {path}", file=sys.stderr)
        return 0 if lost == 0 else 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        broker.stop(layout)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
