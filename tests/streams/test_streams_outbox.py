"""The worker's one producer on a real broker: a wait that returns means every write is in the
log, a refused write fails the wait (once), and the table's writes land in its changelog
partition, where the store learns how far the changelog holds them.

The join acks input only after these waits (``streams.join``); what would break if the wait
returned early is the at-least-once guarantee the worker tests check end to end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from infra.settings import admin
from infra.topics import TopicNames
from streams.app import build_app
from streams.outbox import NotDurable, Outbox
from streams.settings import WorkerSettings
from streams.tablestore import TableStore, changelog_topic, record_changelog_offsets
from tests.support.kafka import drain


def test_a_returned_wait_means_every_write_is_in_the_log(kafka_bootstrap, topic_names) -> None:
    outbox = Outbox(kafka_bootstrap)
    for i in range(5000):
        outbox.send(topic_names.rewards, f"k{i}".encode(), f"v{i}".encode())
    outbox.send(topic_names.late, b"k", b"late", headers=[("rtrl.arrival", b"late")])
    asyncio.run(outbox.durable())
    got = {m.value() for m in drain(kafka_bootstrap, topic_names.rewards, expected=5000)}
    assert got == {f"v{i}".encode() for i in range(5000)}
    (late,) = drain(kafka_bootstrap, topic_names.late, expected=1)
    assert dict(late.headers()) == {"rtrl.arrival": b"late"}


def test_a_refused_write_fails_the_wait_once(kafka_bootstrap, topic_names) -> None:
    outbox = Outbox(kafka_bootstrap)
    outbox.send(topic_names.rewards, b"k", b"fine")
    outbox.send(topic_names.rewards, b"k", b"nowhere", partition=999)  # no such partition
    with pytest.raises(NotDurable, match="refused"):
        asyncio.run(outbox.durable(timeout_s=60))
    asyncio.run(outbox.durable(timeout_s=60))  # reported once; nothing else is pending
    outbox.send(topic_names.rewards, b"k", b"after")
    asyncio.run(outbox.durable())
    assert {m.value() for m in drain(kafka_bootstrap, topic_names.rewards, expected=2)} == {
        b"fine",
        b"after",
    }


def test_table_writes_land_in_their_changelog_partition(kafka_bootstrap,
                                                        topic_names: TopicNames,
                                                        tmp_path: Path) -> None:  # fmt: skip
    settings = WorkerSettings(
        bootstrap=kafka_bootstrap,
        topic_prefix=topic_names.prefix,
        group_id=f"g-{topic_names.prefix}",
        data_dir=tmp_path,
        store="rocksdb",
    )
    _, worker = build_app(settings)
    table, outbox = worker.table, worker.outbox
    topic = changelog_topic(table)
    admin_client = AdminClient(admin(kafka_bootstrap))  # kept: its futures need it alive
    created = admin_client.create_topics(
        [NewTopic(topic, settings.partitions, 1, config={"cleanup.policy": "compact"})]
    )
    created[topic].result(30)
    store = TableStore(table, 2, outbox)
    store.put("i/a", b"one")
    store.put("i/b", b"two")
    store.put("i/a", b"three")
    store.delete("i/b")
    store.delete("i/never")  # nothing stored: nothing written
    assert store.get("i/a") == b"three" and store.get("i/b") is None
    assert dict(store.items()) == {"i/a": b"three"}
    assert TableStore(table, 3, outbox).get("i/a") is None  # another partition's database
    asyncio.run(outbox.durable())
    record_changelog_offsets(table, outbox, {2, 3})
    log = drain(kafka_bootstrap, topic, expected=4)
    assert {m.partition() for m in log} == {2}
    assert [(m.key(), m.value()) for m in sorted(log, key=lambda m: m.offset())] == [
        (b"i/a", b"one"),
        (b"i/b", b"two"),
        (b"i/a", b"three"),
        (b"i/b", None),
    ]
    from faust.types import TP

    last = max(m.offset() for m in log)
    assert table.data.persisted_offset(TP(topic, 2)) == last
    assert table.data.persisted_offset(TP(topic, 3)) is None


def test_the_rocksdb_store_gets_the_memory_budget(tmp_path: Path) -> None:
    """Faust's own defaults would give each partition's database a 2 GiB block cache."""
    settings = WorkerSettings(
        bootstrap="localhost:1", store="rocksdb", data_dir=tmp_path, rocksdb_partition_mib=32
    )
    _, worker = build_app(settings)
    options = worker.table.data.rocksdb_options
    assert (
        options.write_buffer_size,
        options.max_write_buffer_number,
        options.block_cache_size,
    ) == (8 * 2**20, 2, 16 * 2**20)
