"""Reading a compacted topic as a table, on the real broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer

from infra.compacted import read_latest
from infra.settings import client


def _produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]]) -> None:
    producer = Producer(client(bootstrap, **{"enable.idempotence": True}))
    for key, value in items:
        producer.produce(topic, value, key)
    assert producer.flush(30) == 0


def test_the_latest_value_of_each_key_and_tombstones_remove(kafka_bootstrap, topic_names):
    topic = topic_names.batches  # compacted
    _produce(
        kafka_bootstrap,
        topic,
        [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"c", None)],
    )
    assert read_latest(kafka_bootstrap, topic) == {b"a": b"2", b"b": b"1"}


def test_an_empty_topic_is_an_empty_table_at_once(kafka_bootstrap, topic_names):
    started = time.monotonic()
    assert read_latest(kafka_bootstrap, topic_names.checkpoints) == {}
    assert time.monotonic() - started < 10


def test_every_partition_is_read_to_its_end(kafka_bootstrap, topic_names):
    topic = topic_names.events  # six partitions
    _produce(kafka_bootstrap, topic, [(f"k{i}".encode(), b"v") for i in range(300)])
    assert len(read_latest(kafka_bootstrap, topic, timeout_s=20)) == 300


def test_an_unknown_topic_or_cluster_raises(kafka_bootstrap):
    with pytest.raises(KafkaException):
        read_latest(kafka_bootstrap, "no-such-topic-here", timeout_s=5)
    started = time.monotonic()
    with pytest.raises(KafkaException):
        read_latest("127.0.0.1:1", "t", timeout_s=3)
    assert time.monotonic() - started < 15
