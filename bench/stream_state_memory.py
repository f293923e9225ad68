"""Memory of one stream worker as open interactions pile up: RSS against open interactions.

    rtrl broker start --port 39092        # or any cluster
    .venv/bin/python bench/stream_state_memory.py --bootstrap 127.0.0.1:39092 \\
        [--interactions 1000000] [--store rocksdb|memory]

Every event opens its own interaction (``interaction.started``, received now, the spec's 30 min
window), so nothing closes during the run and the worker ends holding ``--interactions`` open
ones. The worker's RSS is sampled every second with how many events it has processed; the
figure is the slope, bytes of RSS per open interaction, fitted over the second half of the run
(after start-up and the first chunks have set the baseline). With the RocksDB store the state is
on disk; what stays in memory per open interaction is its deadline in the partition's heap.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

from stream_join import PROGRESS, REPO, worker  # noqa: E402

from infra.settings import client  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from rewards.timestamps import format_us  # noqa: E402


def produce_started(bootstrap: str, topic: str, n: int) -> None:
    """``n`` interactions, one ``interaction.started`` each, received now."""
    producer = Producer(
        client(
            bootstrap, **{"linger.ms": 20, "enable.idempotence": True, "compression.type": "lz4"}
        )
    )
    now = format_us(time.time_ns() // 1000)
    for i in range(n):
        iid = f"mem-{uuid.uuid4().hex[:16]}"
        event = {
            "event_id": f"{iid}-0",
            "type": "interaction.started",
            "schema_version": 1,
            "ts": now,
            "received_at": now,
            "interaction_id": iid,
            "session_id": "s",
            "user_id": "u",
            "org_id": "o",
            "checkpoint_id": "c",
            "payload": {},
        }
        while True:
            try:
                producer.produce(topic, orjson.dumps(event), iid.encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def processed(log: Path) -> int:
    counts = [
        int(m["events"])
        for line in log.read_text(errors="replace").splitlines()
        if (m := PROGRESS.search(line))
    ]
    return counts[-1] if counts else 0


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares MiB per event over the points (events, MiB)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--interactions", type=int, default=1_000_000)
    ap.add_argument("--store", default="rocksdb", choices=("rocksdb", "memory"))
    ap.add_argument(
        "--rocksdb-mib",
        type=int,
        default=None,
        help="the worker's RocksDB memory per partition (default: the worker's)",
    )
    ap.add_argument(
        "--deadlines-in-memory",
        type=int,
        default=None,
        help="the worker's deadlines kept in memory per partition (default: its own)",
    )
    ap.add_argument("--timeout-s", type=float, default=1800)
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "stream_memory")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) is required")
    args.work.mkdir(parents=True, exist_ok=True)
    names = TopicNames(f"mem{uuid.uuid4().hex[:8]}.")
    apply_topics(args.bootstrap, names, replication=1)
    print(f"producing {args.interactions:,} interaction.started events ...", flush=True)
    produce_started(args.bootstrap, names.events, args.interactions)
    log = args.work / f"{args.store}.log"
    extra = ["--store", args.store]
    if args.rocksdb_mib is not None:
        extra += ["--rocksdb-mib", str(args.rocksdb_mib)]
    if args.deadlines_in_memory is not None:
        extra += ["--deadlines-in-memory", str(args.deadlines_in_memory)]
    proc = worker(args.bootstrap, names.prefix, args.work / names.prefix, log, *extra)
    samples: list[tuple[int, float]] = []
    deadline = time.monotonic() + args.timeout_s
    try:
        while time.monotonic() < deadline:
            time.sleep(1)
            samples.append((processed(log), rss_mib(proc.pid)))
            done, mib = samples[-1]
            if len(samples) % 15 == 0:
                print(f"  {done:>9,} events  RSS {mib:6.0f} MiB", flush=True)
            if done >= args.interactions:
                break
        else:
            raise TimeoutError(f"the worker did not get through the events; see {log}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    second_half = [(x, y) for x, y in samples if x >= args.interactions // 2]
    per_open = slope(second_half) * 1024 * 1024
    start_mib = next(y for x, y in samples if x > 0)
    end_mib = samples[-1][1]
    print(
        f"worker {' '.join(extra)}, {args.interactions:,} open interactions: RSS "
        f"{start_mib:.0f} MiB after the first chunk, {end_mib:.0f} MiB at the end; "
        f"{per_open:,.0f} bytes of RSS per open interaction (slope over the second half)"
    )
    path = write_results(
        f"stream_state_memory_{args.store}",
        {
            "benchmark": "stream_state_memory",
            "store": args.store,
            "worker_args": extra,
            "open_interactions": args.interactions,
            "rss_first_chunk_mib": start_mib,
            "rss_end_mib": end_mib,
            "bytes_per_open_interaction": per_open,
            "samples": samples,
        },
    )
    print(f"-> {path}")
    print(json.dumps({"bytes_per_open_interaction": round(per_open)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
