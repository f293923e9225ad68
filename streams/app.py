"""Faust wiring of the stream join, and only that: the app, its table, one agent, one timer.

How Faust 0.15.3 orders offsets and writes, read from its source, and what this app relies on:

* ``Stream.noack_take`` (``faust/streams.py``) yields events and never acks them; ``take`` acks
  its whole buffer in a ``finally`` even when the consumer of the batch raised (the known trap).
  The agent acks each event itself after the chunk's output is durable (``streams.join``), and a
  failing chunk ends the process before any ack.
* The consumer commits, per partition, the highest offset below which every message was acked
  (``Consumer._new_offset``). ``Consumer._commit_offsets`` awaits ``app.producer.flush()`` first,
  but that is no guarantee: the producer buffer's flush returns after 0.1 s without progress
  with changelog writes still queued (``ProducerBuffer.flush_atmost``). So the table is a
  :class:`~streams.tablestore.ChangelogTable`, and the agent acks nothing before every changelog
  write of its chunk is acknowledged. With ``producer_acks=-1`` acknowledged means in every
  in-sync replica.
* Table writes take their store and changelog partition from the current event. The agent sets
  it to the chunk's partition (``streams.tablestore.partition_context``), so the changelog stays
  co-partitioned with ``telemetry.events`` even for writes made by the idle timer.
* Around a rebalance the fetcher can give up delivering a message (``wait_first`` with the
  suspend-flow event) yet move its read offset past it, and ``Consumer._new_offset`` accepts an
  acked offset one above the committed one: a message can be skipped and committed unseen. The
  agent checks every offset (``streams.offsets``) and exits for a restart on a hole.
* ``concurrency=1``: one chunk at a time (faust-streaming #606 is about ``concurrency > 1``).
* No windowed table (faust-streaming #385): windows are plain state with explicit deadlines.
* Faust creates the changelog topic itself with the admin API (compacted, the input's partition
  count), which works with broker auto-creation disabled; the other topics must exist already
  (``rtrl topics apply``).
"""

from __future__ import annotations

from typing import Any

import faust

from infra.settings import faust_options
from streams.join import JoinWorker
from streams.settings import WorkerSettings
from streams.tablestore import ChangelogTable

TABLE_NAME = "interactions"


def build_app(settings: WorkerSettings) -> tuple[faust.App, JoinWorker]:
    app = faust.App(
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
        Table=ChangelogTable,
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
    worker = JoinWorker(app, table, settings)

    @app.agent(events, concurrency=1, name="join")
    async def join(stream: Any) -> None:
        async for chunk in stream.noack_take(settings.chunk_size, within=settings.chunk_within_s):
            await worker.handle_chunk(stream, chunk)

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
