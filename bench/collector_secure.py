#!/usr/bin/env python3
"""What SASL_SSL costs the collector: events/s into Kafka over plaintext and over SASL_SSL
(SCRAM-SHA-512 over mutual TLS, ACLs on), in one run, with the same events and settings.

Two single-node brokers, one after the other on this machine: a plaintext one, then one from
`rtrl broker start --secure` (the collector runs with its own user and certificate, the raw
producer with the admin's). For each: the raw confluent-kafka producer with the platform's
settings (the ceiling), then the collector in its own process taking ``--events`` events in
batches of ``--batch`` from ``--concurrency`` clients (JSON, then gzip), as in
``bench/collector_throughput.py``. The plaintext broker is measured again at the end: the
spread between its two runs is the noise the difference must exceed. Figures go to stdout and
``bench/out/collector_secure.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, quiet_port_block, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import orjson  # noqa: E402
from collector_throughput import (  # noqa: E402
    ORG,
    client_events,
    cpu_seconds,
    post_all,
    quantile,
    raw_producer,
    start_collector,
)

from infra import broker  # noqa: E402
from infra.api_keys import KeyStore  # noqa: E402
from infra.broker_config import ClusterLayout  # noqa: E402
from infra.kafka_dist import default_cache_root  # noqa: E402
from infra.kafka_security import CONFIG_ENV, ENV_FIELDS, KafkaSecurity, read_security_file  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def measure(
    label: str,
    bootstrap: str,
    names: TopicNames,
    admin: KafkaSecurity,
    collector_env: dict[str, str],
    events: list[dict],
    bodies: dict[str, list[bytes]],
    concurrency: int,
    tmp: Path,
) -> list[dict]:
    """The raw producer's row and the collector's (JSON, gzip) on one broker."""
    apply_topics(bootstrap, names, replication=1, security=admin)
    raw_producer(bootstrap, names.late, events[:20_000], admin)  # warm-up: leaders, PID
    raw = raw_producer(bootstrap, names.events, events, admin)
    rows = [{**raw, "row": f"{label}: raw producer"}]
    key_db = tmp / f"keys-{uuid.uuid4().hex[:6]}.sqlite"
    store = KeyStore(key_db)
    key = store.create(ORG)
    store.close()
    proc, url = start_collector(bootstrap, names.prefix, key_db, 1, collector_env)
    try:
        asyncio.run(post_all(url, key, bodies["json"][:20], False, 2))  # warm-up
        for encoding, batch in bodies.items():
            cpu_before = cpu_seconds(proc)
            seconds, latencies, accepted = asyncio.run(
                post_all(url, key, batch, encoding == "gzip", concurrency)
            )
            assert accepted == len(events), (accepted, len(events))
            rows.append(
                {
                    "row": f"{label}: collector, {encoding}, {concurrency} clients",
                    "events": accepted,
                    "seconds": seconds,
                    "events_per_s": accepted / seconds,
                    "cpu_us_per_event": (cpu_seconds(proc) - cpu_before) * 1e6 / accepted,
                    "latency_p50_ms": 1000 * quantile(latencies, 0.50),
                    "latency_p99_ms": 1000 * quantile(latencies, 0.99),
                }
            )
    finally:
        proc.terminate()
        proc.wait(30)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    events = client_events(args.events)
    plain = [
        orjson.dumps({"events": events[i : i + args.batch]})
        for i in range(0, len(events), args.batch)
    ]
    bodies = {"json": plain, "gzip": [gzip.compress(b, 5) for b in plain]}
    base_env = {k: v for k, v in os.environ.items() if k not in ENV_FIELDS and k != CONFIG_ENV}
    rows: list[dict] = []
    parent = REPO / ".rtrl" / "bench"
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent) as tmp_dir:
        tmp = Path(tmp_dir)
        for run, secure in (("plaintext", False), ("SASL_SSL", True), ("plaintext again", False)):
            layout = ClusterLayout(
                tmp / f"kafka-{len(rows)}", port=quiet_port_block(2), secure=secure
            )
            print(f"starting a {run} broker ...", file=sys.stderr, flush=True)
            names = TopicNames(prefix=f"bench{uuid.uuid4().hex[:8]}.")  # the ACLs name them
            bootstrap = broker.start(layout, default_cache_root(os.environ), names=names)
            try:
                if secure:
                    admin = KafkaSecurity(**read_security_file(layout.secure_dir / "admin.toml"))
                    env = {**base_env, CONFIG_ENV: str(layout.secure_dir / "collector.toml")}
                else:
                    admin, env = KafkaSecurity(), base_env
                rows += measure(
                    run, bootstrap, names, admin, env, events, bodies, args.concurrency, tmp
                )
            finally:
                broker.stop(layout)
                shutil.rmtree(layout.data_dir, ignore_errors=True)
    print(
        format_table(
            ["row", "events", "events/s", "CPU µs/event", "p50 ms", "p99 ms"],
            [
                [
                    r["row"],
                    r["events"],
                    int(r["events_per_s"]),
                    r["cpu_us_per_event"],
                    r.get("latency_p50_ms", "-"),
                    r.get("latency_p99_ms", "-"),
                ]
                for r in rows
            ],
        )
    )
    path = write_results(
        "collector_secure",
        {
            "benchmark": "collector_secure",
            "machine": machine(),
            "batch": args.batch,
            "concurrency": args.concurrency,
            "rows": rows,
        },
    )
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
