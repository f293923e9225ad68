"""Benchmark of the stream join: the worker beside its limits and Quix Streams, and latency.

    rtrl broker start --port 39092        # or any cluster
    python3.11 -m venv bench/out/quix-venv
    bench/out/quix-venv/bin/pip install -r bench/requirements-quix.txt
    .venv/bin/python bench/stream_join.py --bootstrap 127.0.0.1:39092 [--interactions 10000]

1. Throughput, every row reading the same freshly produced ``telemetry.events`` from offset 0:
   a raw aiokafka ``getmany`` loop that only counts; the no-durability limit (the same loop,
   plus ``read_message``, grouping per interaction and ``compute_record`` once per
   interaction); the same join in Quix Streams (``bench/quix_join.py``, RocksDB + changelog,
   in its own virtualenv) at each ``--quix-commit`` interval; then one worker
   (``python -m streams``), whose rate is taken from its progress lines between the first
   batch and the last event, so start-up and the idle closing of the last windows are not
   counted.
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
from typing import NamedTuple

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from infra.settings import aiokafka_options, client  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from rewards.config import RewardConfig  # noqa: E402
from rewards.function import compute_record  # noqa: E402
from rewards.timestamps import format_us  # noqa: E402
from rewards.workload import generate_workload  # noqa: E402

PROGRESS = re.compile(r"^\[?(?P<at>\S+ \S+?),(?P<ms>\d{3})\]?.*progress events=(?P<events>\d+)")
QUIX_PYTHON = REPO / "bench" / "out" / "quix-venv" / "bin" / "python"


def produce(bootstrap: str, topic: str, events: list[dict]) -> None:
    p = Producer(client(bootstrap, **{"linger.ms": 20, "enable.idempotence": True}))
    for e in events:
        p.produce(topic, key=e["interaction_id"].encode(), value=orjson.dumps(e))
        p.poll(0)
    assert p.flush(60) == 0


class Rate(NamedTuple):
    """Events/s, and CPU microseconds per event (every thread of the process that ran it)."""

    per_s: float
    cpu_us: float


async def raw_consume(bootstrap: str, topic: str, total: int, join: bool = False) -> Rate:
    """Events/s of a bare aiokafka loop that only counts (the ceiling); with ``join``, the
    no-durability limit: every message validated and grouped per interaction, then one
    ``compute_record`` per interaction."""
    from streams.intake import Rejected, read_message

    meta = Consumer(client(bootstrap, **{"group.id": "bench-meta"}))
    partitions = meta.list_topics(topic, timeout=30).topics[topic].partitions
    meta.close()
    consumer = AIOKafkaConsumer(
        **aiokafka_options(bootstrap), enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        seen, start, cpu = 0, time.perf_counter(), time.process_time()
        groups: dict[str, list[dict]] = {}
        while seen < total:
            batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for msgs in batch.values():
                seen += len(msgs)
                if join:
                    for m in msgs:
                        item = read_message(m.key, m.value)
                        if not isinstance(item, Rejected):
                            groups.setdefault(item.event["interaction_id"], []).append(item.event)
        config = RewardConfig()
        for group in groups.values():
            compute_record(group, config)
        cpu_us = (time.process_time() - cpu) / total * 1e6
        return Rate(total / (time.perf_counter() - start), cpu_us)
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


def _progress(log: Path) -> list[tuple[float, int]]:
    points = []
    for line in log.read_text(errors="replace").splitlines():
        m = PROGRESS.search(line)
        if m:
            at = datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S").timestamp()
            points.append((at + int(m["ms"]) / 1000, int(m["events"])))
    return points


def _cpu_s(pid: int) -> float:
    """User + system time of a process, every thread, so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def join_rate(log: Path, pid: int, total: int, timeout: float) -> Rate:
    """Events/s between the first progress line with events and the one reaching ``total``;
    CPU per event between the moments those lines were first seen."""
    deadline = time.monotonic() + timeout
    first: tuple[float, int] | None = None
    while time.monotonic() < deadline:
        points = _progress(log)
        if points and first is None:
            first = (_cpu_s(pid), points[-1][1])
        done = [p for p in points if p[1] >= total]
        if first is not None and done:
            (t0, n0), (t1, n1) = points[0], done[0]
            cpu_us = (_cpu_s(pid) - first[0]) / max(total - first[1], 1) * 1e6
            return Rate((n1 - n0) / max(t1 - t0, 1e-9), cpu_us)
        time.sleep(0.05)
    raise TimeoutError(f"the worker did not reach {total} events; see {log}")


def quix_rate(bootstrap: str, names: TopicNames, total: int, work: Path,
              commit_interval: float) -> Rate | None:  # fmt: skip
    """Events/s of the same join in Quix Streams (``bench/quix_join.py``), or None without its
    virtualenv."""
    if not QUIX_PYTHON.exists():
        return None
    out = subprocess.run(
        [str(QUIX_PYTHON), str(REPO / "bench" / "quix_join.py"), "--bootstrap", bootstrap,
         "--input", names.events, "--output", f"{names.prefix}quix.rewards", "--total",
         str(total), "--state-dir", str(work / f"quix-state-{time.time_ns()}"),
         "--commit-interval", str(commit_interval)],
        capture_output=True, text=True, timeout=900, check=True,
    )  # fmt: skip
    m = re.search(r"quix events=(\d+) seconds=\S+ rate=(\d+) cpu_us=(\S+)", out.stdout)
    assert m, out.stdout[-2000:] + out.stderr[-2000:]
    return Rate(float(m.group(2)), float(m.group(3)))


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


def latencies(bootstrap: str, topic: str, grace_s: float) -> list[tuple[float, float]]:
    """(when the window could close, seconds until its first record was on ``topic``)."""
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
            out.append((close, m.timestamp()[1] / 1000 - close))
        if msgs:
            idle_since = time.monotonic()
    c.close()
    return out


def worker_rate(args: argparse.Namespace, names: TopicNames, total: int,
                run: int) -> tuple[Rate, float]:  # fmt: skip
    """One worker joining the whole topic from offset 0 (a group of its own); its peak RSS."""
    log = args.work / f"throughput-{run}.log"
    log.unlink(missing_ok=True)
    proc = worker(args.bootstrap, names.prefix, args.work / f"{names.prefix}{run}", log,
                  "--store", args.store, "--chunk-size", args.chunk_size,
                  "--group-id", f"bench-{names.prefix}{run}")  # fmt: skip
    try:
        rate = join_rate(log, proc.pid, total, timeout=900)
        return rate, _peak_rss_mb(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)


def throughput(args: argparse.Namespace) -> None:
    names = TopicNames(f"bench{uuid.uuid4().hex[:8]}.")
    apply_topics(args.bootstrap, names, replication=1)
    events = generate_workload(args.interactions, seed=1, start="2026-01-05T00:00:00Z")
    produce(args.bootstrap, names.events, events)
    topic, total = (args.bootstrap, names.events), len(events)
    load_before = os.getloadavg()
    rows: list[tuple[str, Rate | None]] = [
        ("raw aiokafka getmany, counting only", asyncio.run(raw_consume(*topic, total))),
        (
            "no durability: read_message + group + compute_record",
            asyncio.run(raw_consume(*topic, total, join=True)),
        ),
    ]
    # Quix and the worker alternate, so that a change in the machine's load (it is shared)
    # weighs on both.
    workers: list[Rate] = []
    peak_rss_mb = 0.0
    for interval in [float(c) for c in args.quix_commit.split(",") if c]:
        rows.append(
            (
                f"Quix Streams, RocksDB + changelog, commit {interval:g} s",
                quix_rate(args.bootstrap, names, total, args.work, interval),
            )
        )
        rate, rss = worker_rate(args, names, total, len(workers))
        workers.append(rate)
        peak_rss_mb = max(peak_rss_mb, rss)
        rows.append((f"rtrl stream worker, 1 process (run {len(workers)})", rate))
    print(f"events={total} interactions={args.interactions} store={args.store}")
    loads = (load_before, os.getloadavg())
    print("load average before / after: " + " / ".join(" ".join(f"{x:.2f}" for x in load)
                                                       for load in loads))  # fmt: skip
    worker_mean = statistics.fmean(r.per_s for r in workers)
    print(f"{'row':<56} {'events/s':>10} {'CPU us/ev':>10} {'worker /':>9}")
    for name, row in rows:
        if row is None:
            print(f"{name:<56} {'(no quix venv: bench/requirements-quix.txt)':>10}")
            continue
        print(f"{name:<56} {row.per_s:>10,.0f} {row.cpu_us:>10.1f} "
              f"{worker_mean / row.per_s:>8.2f}x")  # fmt: skip
    quix = [r.per_s for name, r in rows if name.startswith("Quix") and r is not None]
    limit = rows[1][1]
    assert limit is not None
    if quix:
        print(
            f"worker (mean of {len(workers)}) / best Quix: {worker_mean / max(quix):.2f}; "
            f"worker / no-durability limit: {worker_mean / limit.per_s:.2f}; "
            f"worker peak RSS {peak_rss_mb:.0f} MiB"
        )


def live_latency(args: argparse.Namespace) -> None:
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
        "--reward-config",
        str(config),
    )
    try:
        time.sleep(15)  # start-up and first assignment
        run_live(args.bootstrap, live, args.live_seconds)
        stopped = time.time()
        time.sleep(10)  # the last windows close (idle rule)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    pairs = latencies(args.bootstrap, live.rewards, grace_s=1)
    (args.work / "latencies.json").write_bytes(orjson.dumps(sorted(pairs)))
    # While events flow, a partition's clock is their received_at; once they stop, it follows
    # the wall clock only after grace without arrivals (spec v1's idle rule), so windows due
    # around the last event wait for that: reported apart (due more than grace before it).
    flowing = [latency for due, latency in pairs if due <= stopped - 1]
    for name, lat in (("while events flow", flowing), ("every window", [x for _, x in pairs])):
        lat.sort()
        if not lat:
            continue
        p90, p99 = (lat[min(len(lat) - 1, int(q * len(lat)))] for q in (0.9, 0.99))
        print(
            f"window close -> record on rewards, {name}: n={len(lat)} "
            f"p50={statistics.median(lat) * 1000:.0f} ms p90={p90 * 1000:.0f} ms "
            f"p99={p99 * 1000:.0f} ms max={lat[-1] * 1000:.0f} ms"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--interactions", type=int, default=5000)
    ap.add_argument("--live-seconds", type=float, default=40)
    ap.add_argument("--store", default="rocksdb", choices=("rocksdb", "memory"))
    ap.add_argument("--chunk-size", default="10000", help="most events per batch of the worker")
    ap.add_argument("--quix-commit", default="5,0.5", help="Quix commit intervals (s) to run")
    ap.add_argument("--no-live", action="store_true", help="skip the latency part")
    ap.add_argument("--live-only", action="store_true", help="only the latency part")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "stream_join")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    args.work.mkdir(parents=True, exist_ok=True)

    if not args.live_only:
        throughput(args)
    if not args.no_live:
        live_latency(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
