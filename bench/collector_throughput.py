#!/usr/bin/env python3
"""Events per second the collector takes end to end into Kafka, against the raw producer.

One run, one broker (started here unless ``--bootstrap``), the same events for every row
(realistic events-v1 envelopes from ``rewards.workload``, re-tenanted to the bench key's org):

* raw confluent-kafka: the platform's producer settings (``reliable_producer``: idempotent,
  acks=all, lz4), every event produced then one ``flush``: the ceiling a Python process gets;
* the collector (``rtrl collector`` in its own process, rate limit lifted) receiving batches of
  ``--batch`` events over HTTP from ``--concurrency`` concurrent clients (httpx, asyncio) in this
  process, plain JSON and gzip. An event counts once its request was answered 200, that is once
  Kafka acknowledged it. Latency is per request, from send to answer.

The raw producer runs once after a warm-up and once more after the collector rows; the ratio is
collector events/s over the faster of the two. "CPU µs/event" is the CPU time (user + system,
librdkafka's threads included) of the process that did the work, per event: the collector's
processes for its rows, the benchmark's own for the raw rows; it moves less than events/s with
the load of this shared machine. Figures go to stdout and to
``bench/out/collector_throughput.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
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
import orjson  # noqa: E402
import psutil  # noqa: E402
from confluent_kafka import KafkaError, Message, Producer  # noqa: E402

from infra.api_keys import KeyStore  # noqa: E402
from infra.kafka_security import KafkaSecurity  # noqa: E402
from infra.settings import reliable_producer  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from rewards.workload import generate_workload  # noqa: E402

ORG = "org-bench"
REPO = Path(__file__).resolve().parent.parent


def client_events(n: int) -> list[dict]:
    """``n`` valid client-side events (no ``received_at``) of one tenant."""
    events: list[dict] = []
    seed = 0
    while len(events) < n:
        for event in generate_workload(max(1, (n - len(events)) // 9), seed=seed):
            event.pop("received_at")
            event["org_id"] = ORG
            events.append(event)
        seed += 1
    return events[:n]


def raw_producer(
    bootstrap: str, topic: str, events: list[dict], security: KafkaSecurity | None = None
) -> dict:
    producer = Producer(reliable_producer(bootstrap, security))
    records = [
        (
            orjson.dumps({**e, "received_at": "2026-11-30T00:00:00.000000Z"}),
            e["interaction_id"].encode(),
        )
        for e in events
    ]
    failed: list[KafkaError] = []

    def note_failure(err: KafkaError | None, _msg: Message) -> None:
        if err:
            failed.append(err)

    cpu_before = time.process_time()  # this process: the loop and librdkafka's threads
    started = time.perf_counter()
    for value, key in records:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=note_failure)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(60)
    seconds = time.perf_counter() - started
    cpu_us = (time.process_time() - cpu_before) * 1e6 / len(events)
    assert left == 0 and not failed, (left, failed[:3])
    return {
        "row": "raw confluent-kafka producer",
        "events": len(events),
        "seconds": seconds,
        "events_per_s": len(events) / seconds,
        "cpu_us_per_event": cpu_us,
    }


def cpu_seconds(proc: subprocess.Popen) -> float:
    """CPU time of the collector: its process and its forked workers."""
    parent = psutil.Process(proc.pid)
    total = 0.0
    for p in (parent, *parent.children(recursive=True)):
        try:
            times = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def start_collector(
    bootstrap: str, prefix: str, key_db: Path, workers: int, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """``rtrl collector`` in its own process, with ``env`` (its Kafka identity) when given."""
    port = quiet_port_block(1)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rtrl.cli",
            "collector",
            "--port",
            str(port),
            "--bootstrap",
            bootstrap,
            "--topic-prefix",
            prefix,
            "--key-db",
            str(key_db),
            "--rate",
            "1000000",
            "--burst",
            "1000000",
            "--workers",
            str(workers),
        ],
        cwd=REPO,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("collector did not start")


async def post_all(
    url: str, key: str, bodies: list[bytes], gzipped: bool, concurrency: int
) -> tuple[float, list[float], int]:
    """Send every body over ``concurrency`` keep-alive connections; HTTP/1.1 written by hand so
    the load generator costs little CPU next to the collector it measures."""
    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\n"
        + ("Content-Encoding: gzip\r\n" if gzipped else "")
        + "Content-Length: "
    )
    latencies: list[float] = []
    accepted = 0
    todo = iter(bodies)

    async def worker() -> None:
        nonlocal accepted
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for body in todo:
                t0 = time.perf_counter()
                writer.write(f"{head}{len(body)}\r\n\r\n".encode() + body)
                status, answer = await read_response(reader)
                latencies.append(time.perf_counter() - t0)
                if status != 200:
                    raise RuntimeError(f"{status}: {answer[:200]!r}")
                accepted += orjson.loads(answer)["accepted"]
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies, accepted


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    header = await reader.readuntil(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    return int(lines[0].split()[1]), await reader.readexactly(length)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of a new one")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--concurrency", default="1,8", help="comma-separated client counts")
    parser.add_argument("--workers", type=int, default=1, help="collector processes")
    args = parser.parse_args()
    events = client_events(args.events)
    batches = [events[i : i + args.batch] for i in range(0, len(events), args.batch)]
    plain = [orjson.dumps({"events": b}) for b in batches]
    zipped = [gzip.compress(b, 5) for b in plain]
    rows = []
    with kafka(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as tmp:
        names = TopicNames(prefix=f"bench{uuid.uuid4().hex[:8]}.")
        apply_topics(bootstrap, names, replication=1)
        raw_producer(bootstrap, names.late, events[:20_000])  # warm-up: JIT, leaders, PID
        raw = raw_producer(bootstrap, names.events, events)
        rows.append(raw)
        store = KeyStore(Path(tmp) / "keys.sqlite")
        key = store.create(ORG)
        store.close()
        proc, url = start_collector(
            bootstrap, names.prefix, Path(tmp) / "keys.sqlite", args.workers
        )
        try:
            asyncio.run(post_all(url, key, plain[:20], False, 2))  # warm-up: connections, PID
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                for gzipped, bodies in ((False, plain), (True, zipped)):
                    cpu_before = cpu_seconds(proc)
                    seconds, latencies, accepted = asyncio.run(
                        post_all(url, key, bodies, gzipped, concurrency)
                    )
                    cpu_us = (cpu_seconds(proc) - cpu_before) * 1e6 / max(1, accepted)
                    assert accepted == len(events), (accepted, len(events))
                    rate = accepted / seconds
                    rows.append(
                        {
                            "row": f"collector x{args.workers}, "
                            f"{'gzip' if gzipped else 'json'}, {concurrency} client(s)",
                            "events": accepted,
                            "seconds": seconds,
                            "events_per_s": rate,
                            "cpu_us_per_event": cpu_us,
                            "requests": len(latencies),
                            "latency_p50_ms": 1000 * quantile(latencies, 0.50),
                            "latency_p99_ms": 1000 * quantile(latencies, 0.99),
                        }
                    )
        finally:
            proc.terminate()
            proc.wait(30)
        # The raw producer again after the collector rows; the faster run is the reference.
        again = raw_producer(bootstrap, names.events, events)
        again["row"] += " (again)"
        rows.insert(1, again)
        best = max(raw["events_per_s"], again["events_per_s"])
        for row in rows:
            row["ratio_to_raw"] = row["events_per_s"] / best
    print(
        format_table(
            ["row", "events", "events/s", "ratio to raw", "CPU µs/event", "p50 ms", "p99 ms"],
            [
                [
                    r["row"],
                    r["events"],
                    int(r["events_per_s"]),
                    r["ratio_to_raw"],
                    r["cpu_us_per_event"],
                    r.get("latency_p50_ms", "-"),
                    r.get("latency_p99_ms", "-"),
                ]
                for r in rows
            ],
        )
    )
    path = write_results(
        "collector_throughput",
        {
            "benchmark": "collector_throughput",
            "machine": machine(),
            "batch": args.batch,
            "event_bytes_avg": sum(map(len, plain)) / len(events),
            "rows": rows,
        },
    )
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
