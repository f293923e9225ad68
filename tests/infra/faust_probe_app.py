"""A minimal Faust worker that counts messages per key into a RocksDB-backed table.

It exists to prove, on a real broker, that faust-streaming 0.15 with aiokafka 0.14 works
against Kafka 4 and that a table recovers from its changelog topic when the local store is
gone. The worker writes its table to a JSON file every few hundred milliseconds so a test
can watch it without a web server.

Run: ``python -m tests.infra.faust_probe_app --broker HOST:PORT --app-id ID --topic IN
--partitions 3 --data-dir DIR --snapshot FILE``. SIGTERM stops it cleanly.

Topics on a cluster with ``auto.create.topics.enable=false``: the input topic must exist
before the worker starts (Faust does not declare a topic it only consumes). Faust itself
creates the table's changelog ``<app-id>-<table>-changelog`` (compacted, partitions of the
table) and its ``<app-id>-__assignor-__leader`` topic through the CreateTopics API, which
Kafka 4 accepts.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import faust

from infra.settings import faust_options

TABLE = "counts"


def changelog_topic(app_id: str) -> str:
    """The name Faust gives the table's changelog.

    >>> changelog_topic("probe")
    'probe-counts-changelog'
    """
    return f"{app_id}-{TABLE}-changelog"


def build_app(
    broker: str, app_id: str, topic: str, partitions: int, data_dir: Path, snapshot: Path
) -> faust.App:
    """The app: one agent (concurrency 1, the default; more would race on the table)."""
    app = faust.App(
        app_id,
        **faust_options(broker),
        store="rocksdb://",
        datadir=str(data_dir),
        web_enabled=False,
        topic_partitions=partitions,
        topic_replication_factor=1,
        producer_acks=-1,
        # Small intervals: the test waits on commits and snapshots.
        broker_commit_every=100,
        broker_commit_interval=0.5,
        table_standby_replicas=0,
    )
    source = app.topic(topic, key_type=str, value_serializer="raw", partitions=partitions)
    counts = app.Table(TABLE, default=int, partitions=partitions)

    @app.agent(source)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1

    @app.timer(interval=0.2)
    async def write_snapshot() -> None:
        tmp = snapshot.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(counts.items())))
        os.replace(tmp, snapshot)

    return app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", required=True)
    ap.add_argument("--app-id", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--snapshot", type=Path, required=True)
    args = ap.parse_args()
    app = build_app(
        args.broker, args.app_id, args.topic, args.partitions, args.data_dir, args.snapshot
    )
    worker = faust.Worker(app, loglevel="INFO", override_logging=True)
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
