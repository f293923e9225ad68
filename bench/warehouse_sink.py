"""Benchmark: sink throughput against a raw consume of the same topic (goal: ratio >= 0.5).

Produces a generated workload's events to ``telemetry.events`` (under a fresh prefix), then
reads them twice with fresh consumer groups: a bare confluent-kafka loop that only counts
messages, and the warehouse sink (parse, partition, write zstd Parquet durably, commit). Both
rates run from the first message received to the last one handled, so the group join is left out.
Uses ``--bootstrap`` if given, else starts a throwaway single-node cluster. Figures go to
``bench/out/warehouse_sink.json``.

    python3 bench/warehouse_sink.py --interactions 30000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import kafka, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import orjson  # noqa: E402
from confluent_kafka import Consumer, Producer  # noqa: E402

from infra.settings import client, reliable_producer  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402
from rewards.workload import generate_workload  # noqa: E402
from warehouse.sink import Sink, SinkConfig  # noqa: E402


def produce(bootstrap: str, topic: str, events: list[dict]) -> None:
    producer = Producer(reliable_producer(bootstrap, **{"linger.ms": 20}))
    for event in events:
        while True:
            try:
                producer.produce(
                    topic, key=event["interaction_id"].encode(), value=orjson.dumps(event)
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
    assert producer.flush(120) == 0


def raw_consume_rate(bootstrap: str, topic: str, expected: int) -> float:
    consumer = Consumer(
        client(
            bootstrap,
            **{
                "group.id": f"raw-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    consumer.subscribe([topic])
    seen, first = 0, None
    try:
        while seen < expected:
            batch = consumer.consume(5000, timeout=1.0)
            if batch and first is None:
                first = time.monotonic()
            seen += sum(1 for m in batch if m.error() is None)
        assert first is not None  # set with the first batch, and expected > 0 to get here
        return seen / (time.monotonic() - first)
    finally:
        consumer.close()


def run(bootstrap: str, interactions: int, repeat: int) -> dict:
    names = TopicNames(prefix=f"bench{uuid.uuid4().hex[:6]}.")
    apply_topics(bootstrap, names, replication=1)
    events = generate_workload(interactions, seed=1)
    start = time.monotonic()
    produce(bootstrap, names.events, events)
    print(f"produced {len(events):,} events in {time.monotonic() - start:.1f} s")
    raws, sinks = [], []
    for _ in range(repeat):  # interleaved, so that a burst of load elsewhere hits both alike
        raws.append(raw_consume_rate(bootstrap, names.events, len(events)))
        with tempfile.TemporaryDirectory() as root:
            config = SinkConfig(bootstrap=bootstrap, root=root, topics=names,
                                group_id=f"sink-{uuid.uuid4().hex}", once=True,
                                compact_every_s=0)  # fmt: skip
            stats = Sink(config).run()
            assert stats.messages == len(events), stats
            files = sum(1 for _ in Path(root).rglob("*.parquet"))
        sinks.append(stats.rate())
        print(
            f"  raw {raws[-1]:,.0f} msg/s, sink {sinks[-1]:,.0f} rows/s "
            f"({stats.flushes} flushes, {files} files)"
        )
    raw, sink = max(raws), max(sinks)
    print(f"raw consume: {raw:,.0f} msg/s (best of {repeat})")
    print(f"sink:        {sink:,.0f} rows/s (best of {repeat})")
    print(f"ratio:       {sink / raw:.2f} (goal >= 0.5)")
    return {
        "events": len(events),
        "raw_msgs_per_s": raw,
        "sink_rows_per_s": sink,
        "ratio": sink / raw,
        "runs": {"raw": raws, "sink": sinks},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interactions", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", default=None, help="use this cluster (default: start one)")
    args = parser.parse_args()
    with kafka(args.bootstrap) as bootstrap:
        results = run(bootstrap, args.interactions, args.repeat)
    path = write_results("warehouse_sink", {"benchmark": "warehouse_sink", "machine": machine(),
                                            **results})  # fmt: skip
    print(f"figures in {path}")


if __name__ == "__main__":
    main()
