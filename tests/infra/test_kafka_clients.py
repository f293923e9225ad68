"""Both Python clients the platform uses, against the real broker: keys, values, per-key order.

confluent-kafka (librdkafka) carries the collector and sinks; aiokafka carries Faust. Each
must round-trip bytes exactly and keep one key in one partition, in send order. They must
also agree on *which* partition a key goes to, or topics written by one and joined by the
other are not co-partitioned: librdkafka's default partitioner (CRC32) differs from the
Java/aiokafka one (murmur2), so producers that feed joined topics set ``murmur2_random``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from infra.settings import admin as admin_conf
from infra.settings import aiokafka_options, client
from tests.support.kafka import drain

PARTITIONS = 6
KEYS = [f"interaction-{i}" for i in range(12)]
N = 240


def _new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"clients.{uuid.uuid4().hex[:10]}"
    admin = AdminClient(admin_conf(bootstrap))
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(timeout=30)
    return name


def _records() -> list[tuple[str, dict]]:
    """(key, value) in send order; ``seq`` counts per key so order can be checked."""
    seq: dict[str, int] = defaultdict(int)
    out = []
    for i in range(N):
        key = KEYS[i % len(KEYS)]
        out.append((key, {"n": i, "seq": seq[key], "note": "é✓"}))
        seq[key] += 1
    return out


def _assert_keyed_and_ordered(
    got: list[tuple[str, dict, int]], sent: list[tuple[str, dict]]
) -> None:
    """``got`` is (key, value, partition) in consumption order."""
    assert sorted((k, v["n"]) for k, v, _ in got) == sorted((k, v["n"]) for k, v in sent)
    assert {(k, orjson.dumps(v)) for k, v, _ in got} == {(k, orjson.dumps(v)) for k, v in sent}
    partitions_of: dict[str, set[int]] = defaultdict(set)
    seqs: dict[str, list[int]] = defaultdict(list)
    for k, v, p in got:
        partitions_of[k].add(p)
        seqs[k].append(v["seq"])
    assert all(len(ps) == 1 for ps in partitions_of.values()), partitions_of
    assert len({next(iter(ps)) for ps in partitions_of.values()}) > 1, "keys should spread"
    for k, s in seqs.items():
        assert s == list(range(len(s))), f"{k} out of order: {s[:10]}"


def test_confluent_round_trip_keeps_keys_values_and_order(kafka_bootstrap):
    topic = _new_topic(kafka_bootstrap)
    sent = _records()
    p = Producer(
        client(kafka_bootstrap, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5})
    )
    errors: list = []
    for k, v in sent:
        p.produce(
            topic,
            key=k.encode(),
            value=orjson.dumps(v),
            on_delivery=lambda err, _m: err and errors.append(err),
        )
    assert p.flush(30) == 0 and not errors
    msgs = drain(kafka_bootstrap, topic, expected=N, timeout=30)
    got = [(m.key().decode(), orjson.loads(m.value()), m.partition()) for m in msgs]
    _assert_keyed_and_ordered(got, sent)


async def _aiokafka_round_trip(bootstrap: str, topic: str, sent: list[tuple[str, dict]]):
    producer = AIOKafkaProducer(
        **aiokafka_options(bootstrap), acks="all", enable_idempotence=True, linger_ms=5
    )
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=k.encode(), value=orjson.dumps(v)) for k, v in sent
        ]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        **aiokafka_options(bootstrap),
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    got: list[tuple[str, dict, int]] = []
    try:
        async with asyncio.timeout(30):
            while len(got) < len(sent):
                batches = await consumer.getmany(timeout_ms=500, max_records=1000)
                for tp, records in batches.items():
                    got += [(r.key.decode(), orjson.loads(r.value), tp.partition) for r in records]
    finally:
        await consumer.stop()
    return metas, got


def test_aiokafka_round_trip_keeps_keys_values_and_order(kafka_bootstrap):
    topic = _new_topic(kafka_bootstrap)
    sent = _records()
    metas, got = asyncio.run(_aiokafka_round_trip(kafka_bootstrap, topic, sent))
    assert [m.topic for m in metas] == [topic] * N
    _assert_keyed_and_ordered(got, sent)
    # The send acknowledgements say where each record went; the reads agree.
    acked = {(k, v["n"]): m.partition for (k, v), m in zip(sent, metas, strict=True)}
    assert {(k, v["n"]): p for k, v, p in got} == acked


async def _aiokafka_partitions(bootstrap: str, topic: str) -> dict[str, int]:
    producer = AIOKafkaProducer(**aiokafka_options(bootstrap))
    await producer.start()
    try:
        metas = [await (await producer.send(topic, key=k.encode(), value=b"x")) for k in KEYS]
    finally:
        await producer.stop()
    return {k: m.partition for k, m in zip(KEYS, metas, strict=True)}


def _confluent_partitions(bootstrap: str, topic: str, **conf) -> dict[str, int]:
    p = Producer(client(bootstrap, **conf))
    where: dict[str, int] = {}

    def record(err: KafkaError | None, m: Message) -> None:
        key, partition = m.key(), m.partition()
        assert key is not None and partition is not None
        where[key.decode()] = partition

    for k in KEYS:
        p.produce(topic, key=k.encode(), value=b"x", on_delivery=record)
    assert p.flush(30) == 0
    return where


def test_confluent_murmur2_partitions_like_aiokafka(kafka_bootstrap):
    """Co-partitioning across clients holds only with ``partitioner=murmur2_random``."""
    topic = _new_topic(kafka_bootstrap)
    by_aiokafka = asyncio.run(_aiokafka_partitions(kafka_bootstrap, topic))
    by_murmur2 = _confluent_partitions(kafka_bootstrap, topic, partitioner="murmur2_random")
    by_default = _confluent_partitions(kafka_bootstrap, topic)
    assert by_murmur2 == by_aiokafka
    assert by_default != by_aiokafka, "librdkafka's default (CRC32) would have to change"
