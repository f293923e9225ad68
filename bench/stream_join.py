"""Benchmark of the stream join: throughput against raw aiokafka, and window-close latency.

    rtrl broker start --port 39092        # or any cluster
    .venv/bin/python bench/stream_join.py --bootstrap 127.0.0.1:39092 [--interactions 5000]

1. Throughput: a generated workload is produced to a fresh ``telemetry.events``; a raw aiokafka
   ``getmany`` loop reads it all (the ceiling), then one worker (``python -m streams``) joins it.
   The worker's rate is taken from its progress lines, between the first chunk and the last
   event, so start-up and the idle closing of the last windows are not counted.
2. Latency: live events (received_at = now) with a 5 s window go to a second topic set; for each
   record, the time it was written to ``rewards`` (CreateTime) minus the moment its window
   could close (t_close + grace).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from infra.settings import aiokafka_options, client  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from rewards.timestamps import format_us  # noqa: E402
from rewards.workload import generate_workload  # noqa: E402

PROGRESS = re.compile(r"^\[?(\S+ \S+?)[,\]].*progress events=(\d+)")


def produce(bootstrap: str, topic: str, events: list[dict]) -> None:
    p = Producer(client(bootstrap, **{"linger.ms": 20, "enable.idempotence": True}))
    for e in events:
        p.produce(topic, key=e["interaction_id"].encode(), value=orjson.dumps(e))
        p.poll(0)
    assert p.flush(60) == 0


async def raw_consume(bootstrap: str, topic: str, total: int) -> float:
    """Events/s of a bare aiokafka loop that only counts (the ceiling)."""
    meta = Consumer(client(bootstrap, **{"group.id": "bench-meta"}))
    partitions = meta.list_topics(topic, timeout=30).topics[topic].partitions
    meta.close()
    consumer = AIOKafkaConsumer(
        **aiokafka_options(bootstrap), enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        seen, start = 0, time.perf_counter()
        while seen < total:
            batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
            seen += sum(len(msgs) for msgs in batch.values())
        return total / (time.perf_counter() - start)
    finally:
        await consumer.stop()


def worker(bootstrap: str, prefix: str, data_dir: Path, log: Path, *extra: str):
    # The worker itself, without its supervisor: its RSS is the one measured.
    cmd = [
        sys.executable,
        "-m",
        "streams",
        "--no-supervisor",
        "--bootstrap",
        bootstrap,
        "--topic-prefix",
        prefix,
        "--data-dir",
        str(data_dir),
        "--progress-s",
        "1",
        *extra,
    ]
    out = open(log, "wb")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def join_rate(log: Path, total: int, timeout: float) -> float:
    """Events/s between the first progress line with events and the one reaching ``total``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        points = []
        for line in log.read_text(errors="replace").splitlines():
            m = PROGRESS.search(line)
            if m:
                at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                points.append((at, int(m.group(2))))
        done = [p for p in points if p[1] >= total]
        if points and done:
            (t0, n0), (t1, n1) = points[0], done[0]
            return (n1 - n0) / max(t1 - t0, 1e-9)
        time.sleep(1)
    raise TimeoutError(f"the worker did not reach {total} events; see {log}")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def live_events(n_interactions: int, rate_per_s: float) -> list[tuple[float, dict]]:
    """(send at, event) for small interactions spread over time; received_at set at send."""
    plan = []
    for i in range(n_interactions):
        start = i / rate_per_s
        iid = f"bench-{uuid.uuid4().hex[:12]}"
        for j, (kind, payload) in enumerate(
            (
                ("interaction.started", {}),
                ("agent.tool_call", {"tool": "grep", "valid": True}),
                ("interaction.completed", {"latency_ms": 900, "output_tokens": 50}),
            )
        ):
            plan.append(
                (
                    start + 0.5 * j,
                    {
                        "event_id": f"{iid}-{j}",
                        "type": kind,
                        "schema_version": 1,
                        "interaction_id": iid,
                        "session_id": "s",
                        "user_id": "u",
                        "org_id": "o",
                        "checkpoint_id": "c",
                        "payload": payload,
                    },
                )
            )
    return sorted(plan, key=lambda item: item[0])


def run_live(bootstrap: str, names: TopicNames, seconds: float) -> None:
    p = Producer(client(bootstrap, **{"linger.ms": 5}))
    t0 = time.time()
    for at, event in live_events(int(seconds * 20), 20.0):
        delay = t0 + at - time.time()
        if delay > 0:
            time.sleep(delay)
        now_us = time.time_ns() // 1000
        event = {**event, "ts": format_us(now_us), "received_at": format_us(now_us)}
        p.produce(names.events, key=event["interaction_id"].encode(), value=orjson.dumps(event))
        p.poll(0)
    p.flush(30)


def latencies(bootstrap: str, topic: str, grace_s: float) -> list[float]:
    c = Consumer(client(bootstrap, **{"group.id": f"b{time.time_ns()}"}))
    parts = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([CTopicPartition(topic, q, 0) for q in parts])
    out, idle_since = [], time.monotonic()
    while time.monotonic() - idle_since < 5:
        msgs = c.consume(1000, timeout=0.5)
        for m in msgs:
            value = m.value()
            assert value is not None, "the rewards topic holds no tombstones"
            rec = orjson.loads(value)
            if rec["revision"] != 0:
                continue
            close = datetime.fromisoformat(rec["t_close"]).timestamp() + grace_s
            out.append(m.timestamp()[1] / 1000 - close)
        if msgs:
            idle_since = time.monotonic()
    c.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--interactions", type=int, default=5000)
    ap.add_argument("--live-seconds", type=float, default=40)
    ap.add_argument("--store", default="rocksdb", choices=("rocksdb", "memory"))
    ap.add_argument("--chunk-size", default="2000", help="events per chunk of the worker")
    ap.add_argument("--no-live", action="store_true", help="skip the latency part")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "stream_join")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    args.work.mkdir(parents=True, exist_ok=True)

    names = TopicNames(f"bench{uuid.uuid4().hex[:8]}.")
    apply_topics(args.bootstrap, names, replication=1)
    events = generate_workload(args.interactions, seed=1, start="2026-01-05T00:00:00Z")
    produce(args.bootstrap, names.events, events)
    raw = asyncio.run(raw_consume(args.bootstrap, names.events, len(events)))
    log = args.work / "throughput.log"
    proc = worker(
        args.bootstrap,
        names.prefix,
        args.work / names.prefix,
        log,
        "--store",
        args.store,
        "--chunk-size",
        args.chunk_size,
    )
    try:
        joined = join_rate(log, len(events), timeout=900)
        peak_rss_mb = _peak_rss_mb(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    print(f"events={len(events)} interactions={args.interactions} store={args.store}")
    print(f"raw aiokafka consume: {raw:,.0f} events/s")
    print(
        f"stream join, 1 worker: {joined:,.0f} events/s  (ratio {joined / raw:.3f}); "
        f"worker peak RSS {peak_rss_mb:.0f} MiB"
    )
    if args.no_live:
        return 0

    live = TopicNames(f"live{uuid.uuid4().hex[:8]}.")
    apply_topics(args.bootstrap, live, replication=1)
    config = args.work / "live.toml"
    config.write_text("window_s = 5\nlate_s = 5\ngrace_s = 1\nremember_closed_s = 3600\n")
    proc = worker(
        args.bootstrap,
        live.prefix,
        args.work / live.prefix,
        args.work / "live.log",
        "--store",
        args.store,
        "--config",
        str(config),
    )
    try:
        time.sleep(15)  # start-up and first assignment
        run_live(args.bootstrap, live, args.live_seconds)
        time.sleep(10)  # the last windows close (idle rule)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    lat = sorted(latencies(args.bootstrap, live.rewards, grace_s=1))
    if lat:
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        print(
            f"window close -> record on rewards: n={len(lat)} "
            f"p50={statistics.median(lat) * 1000:.0f} ms p99={p99 * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
