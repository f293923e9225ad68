"""Faust wiring of the stream join, and only that: the app, its table, the batch consumer, one
timer, and the rebalance and stop hooks.

How Faust 0.15.3 orders offsets and writes, read from its source, and what this app relies on:

* Messages of ``telemetry.events`` reach the join a fetched batch at a time
  (``streams.fetch``), not through an agent's stream: Faust's per-message delivery was most of
  the worker's time. Nothing is acked by Faust; the join acks each message after its output is
  durable (``streams.join``), and a failing batch ends the process before any ack.
* The consumer commits, per partition, the highest offset below which every message was acked
  (``Consumer._new_offset``). Faust flushes its own producer before committing, which is no
  guarantee (its buffer's flush gives up after 0.1 s without progress), and the join writes
  nothing through it: state, changelog and outputs go through the join's
  :class:`~streams.outbox.Outbox` (one confluent-kafka producer, ``acks=all``), which the join
  waits on before it acks.
* The table is Faust's, for its store, its changelog topic and the recovery from it; the join
  writes the store and the changelog itself (``streams.tablestore``), in the input's partition.
* Around a rebalance the fetcher can move its read offset past a message it never delivered,
  and ``Consumer._new_offset`` accepts an acked offset one above the committed one: a message
  can be skipped and committed unseen (faust-streaming #216). The join checks every offset
  (``streams.offsets``) and exits for a restart on a hole.
* One batch at a time (faust-streaming #606 is about agents with ``concurrency > 1``); a
  rebalance and the stop wait for the batch in flight (``JoinWorker.wait_idle``).
* No windowed table (faust-streaming #385): windows are plain state with explicit deadlines.
* Faust creates the changelog topic itself with the admin API (compacted, the input's partition
  count), which works with broker auto-creation disabled; the other topics must exist already
  (``rtrl topics apply``).
"""

from __future__ import annotations

from typing import Any

from infra.settings import faust_options
from streams.fetch import BatchApp
from streams.join import JoinWorker
from streams.outbox import Outbox
from streams.settings import WorkerSettings

TABLE_NAME = "interactions"


def build_app(settings: WorkerSettings) -> tuple[BatchApp, JoinWorker]:
    app = BatchApp(
        settings.app_id,
        **faust_options(settings.bootstrap),
        store="rocksdb://" if settings.store == "rocksdb" else "memory://",
        datadir=str(settings.data_dir),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.changelog_replication,
        topic_allow_declare=True,
        table_standby_replicas=0,
        web_enabled=False,
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        processing_guarantee="at_least_once",
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.session_timeout_s / 4,
        broker_max_poll_records=settings.chunk_size,
        # Up to 4 MiB fetched per partition at once (Faust's default is 1 MiB): batches of
        # thousands of events, and fewer waits for durability per event.
        consumer_max_fetch_size=4 * 2**20,
    )
    events = app.topic(settings.topics.events, key_type=bytes, value_type=bytes,
                       key_serializer="raw", value_serializer="raw",
                       partitions=settings.partitions)  # fmt: skip
    table = app.Table(
        TABLE_NAME,
        partitions=settings.partitions,
        key_type=bytes,
        value_type=bytes,  # bytes: the raw serializer; the processor encodes JSON
        options=settings.rocksdb_options() if settings.store == "rocksdb" else None,
    )
    worker = JoinWorker(app, table, settings, Outbox(settings.bootstrap))
    app.consume_in_batches(events, worker.handle_batch, before_stop=worker.close)

    @app.timer(settings.tick_s)
    async def idle_tick() -> None:
        await worker.tick()

    # mode types a handler as (sender, /, *args, signal=..., **kwargs): Faust sends one argument.
    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, /, *_revoked: Any, **_: Any) -> None:
        await worker.wait_idle()

    @app.on_partitions_assigned.connect
    async def on_assigned(sender: Any, /, *args: Any, **_: Any) -> None:
        (assigned,) = args
        await worker.keep_partitions(
            {tp.partition for tp in assigned if tp.topic == settings.topics.events}
        )

    return app, worker
