"""The batch consumer's drain loop (``streams.fetch``) in this process, on the real broker.

A :class:`~streams.fetch.BatchApp` consumes one topic in batches and another through a Faust
agent, as the worker consumes its input and its table's changelog: each batch topic's message
arrives once, as aiokafka's record, in offset order per partition, several per call; the other
topic's messages reach the agent through Faust's callback; what the batches acked is committed
by the loop (every ``broker_commit_every`` acks; Faust's periodic commit is off), and a stop
ends the loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiokafka.structs import ConsumerRecord
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.settings import admin, client, faust_options
from streams.fetch import BatchApp, BatchConsumer
from tests.support.kafka import produce_json

PARTITIONS = 2
N, M = 400, 30
COMMIT_EVERY = 50


def _create(bootstrap: str, *topics: str) -> None:
    admin_client = AdminClient(admin(bootstrap))
    created = admin_client.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    for future in created.values():
        future.result(30)


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer(client(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        asked = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(asked, timeout=30)}
    finally:
        consumer.close()


async def _consume(
    bootstrap: str, app_id: str, batch_topic: str, other_topic: str, data_dir: Path
) -> tuple:
    app = BatchApp(
        app_id,
        **faust_options(bootstrap),
        datadir=str(data_dir),  # Faust's default is a folder in the working directory
        store="memory://",
        web_enabled=False,
        topic_partitions=PARTITIONS,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=COMMIT_EVERY,
        broker_commit_interval=3600,  # no periodic commit: only the drain loop's own
        broker_max_poll_records=100,
    )
    batches: list[list[Any]] = []
    others: list[bytes] = []
    done = asyncio.Event()

    def check_done() -> None:
        if sum(map(len, batches)) >= N and len(others) >= M:
            done.set()

    async def on_batch(records: list[Any]) -> None:
        batches.append(records)
        by_partition: dict[Any, list[int]] = {}
        for record in records:
            by_partition.setdefault(record.partition, []).append(record.offset)
        consumer = app.consumer
        assert isinstance(consumer, BatchConsumer)
        for partition, offsets in by_partition.items():
            consumer.ack_offsets(_tp(batch_topic, partition), offsets)
        check_done()

    stopped_batches: list[int] = []

    async def before_stop() -> None:
        stopped_batches.append(len(batches))

    batch = app.topic(batch_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw")  # fmt: skip
    app.consume_in_batches(batch, on_batch, before_stop)

    @app.agent(app.topic(other_topic, value_type=bytes, value_serializer="raw"))
    async def other(stream: Any) -> None:
        async for value in stream:
            others.append(value)
            check_done()

    await app.start()
    try:
        await asyncio.wait_for(done.wait(), 90)
        # Committed while the app runs: by the loop, once every COMMIT_EVERY acks.
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            committed = await asyncio.to_thread(_committed, bootstrap, app_id, batch_topic)
            enough = sum(max(o, 0) for o in committed.values()) > N - COMMIT_EVERY
            if enough or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.5)
    finally:
        await app.stop()
    return batches, others, stopped_batches, committed


def _tp(topic: str, partition: int) -> Any:
    from faust.types import TP

    return TP(topic, partition)


def test_the_drain_loop_hands_over_batches_and_commits_what_they_acked(
    kafka_bootstrap, topic_names, tmp_path
) -> None:
    batch_topic, other_topic = f"{topic_names.prefix}batch", f"{topic_names.prefix}other"
    _create(kafka_bootstrap, batch_topic, other_topic)
    values = [{"i": i} for i in range(N)]
    produce_json(kafka_bootstrap, batch_topic, values, key=lambda v: f"k{v['i'] % 7}")
    produce_json(kafka_bootstrap, other_topic, [{"o": i} for i in range(M)])
    app_id = f"{topic_names.prefix}drain"

    batches, others, stopped, committed = asyncio.run(
        _consume(kafka_bootstrap, app_id, batch_topic, other_topic, tmp_path)
    )

    records = [r for b in batches for r in b]
    assert all(isinstance(r, ConsumerRecord) and r.topic == batch_topic for r in records)
    assert sorted((r.partition, r.offset) for r in records) == sorted(
        {(r.partition, r.offset) for r in records}
    ), "a message delivered twice"
    assert len(records) == N
    for partition in range(PARTITIONS):
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(len(offsets))), f"partition {partition} out of order"
    assert max(map(len, batches)) > 1, "one message per call: no batching"
    assert len(others) == M, "the other topic's messages did not reach Faust's callback"
    assert stopped == [len(batches)], "before_stop not awaited once, after the last batch"
    ends = {p: len([r for r in records if r.partition == p]) for p in range(PARTITIONS)}
    assert all(0 <= committed[p] <= ends[p] for p in ends), (committed, ends)
    assert sum(committed.values()) > N - COMMIT_EVERY, (committed, ends)
