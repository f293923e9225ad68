"""The worker's wait for durable state, without a broker: it waits for every changelog write.

``app.producer.flush()`` may return while changelog writes are still queued (Faust's producer
buffer gives up after 0.1 s without a message sent); a worker that trusted it, published and
acked, then was killed, lost state whose input offsets were committed. Here there is no broker:
the changelog topic's ``publish_message`` (what hands a write to the producer) only records the
writes, and the tests acknowledge or fail them by hand, as the producer would. The path through
a real producer is the worker tests' (``test_streams_worker.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from faust.types.tuples import FutureMessage

from streams.app import build_app
from streams.settings import WorkerSettings
from streams.tablestore import ChangelogTable, TableStore, partition_context


def _app(tmp_path: Path):
    settings = WorkerSettings(bootstrap="localhost:1", store="memory", data_dir=tmp_path)
    app, worker = build_app(settings)
    return app, worker.table, settings.topics.events


def _write(table, topic: str, partition: int, key: str) -> None:
    with partition_context(topic, partition):
        TableStore(table, partition).put(key, b"state")


class _Handed:
    """Stands for the producer: the writes handed to it, in order."""

    def __init__(self, table) -> None:
        self.futures: list[asyncio.Future] = []
        table.changelog_topic.publish_message = self.publish

    async def publish(self, future, wait: bool = False):
        self.futures.append(future)
        return future

    def take(self, count: int) -> list[asyncio.Future]:
        assert len(self.futures) == count, self.futures
        taken, self.futures = self.futures, []
        return taken


def _partition_of(write: asyncio.Future) -> int | None:
    """The partition a changelog write was handed over for."""
    assert isinstance(write, FutureMessage)
    return write.message.partition


async def _returns_within(awaitable, seconds: float) -> bool:
    try:
        await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        return False
    return True


def test_the_wait_ends_only_when_every_changelog_write_is_acknowledged(tmp_path) -> None:
    async def scenario() -> None:
        app, table, topic = _app(tmp_path)
        assert isinstance(table, ChangelogTable)
        producer = _Handed(table)
        _write(table, topic, 1, "i/a")
        _write(table, topic, 2, "i/b")
        assert producer.take(0) == []  # recorded, not yet handed over
        assert not await _returns_within(table.changelog_acknowledged(), 0.3)
        first, second = producer.take(2)  # handed over in order, once
        assert _partition_of(first) == 1 and _partition_of(second) == 2
        assert not first.cancelled() and not second.cancelled()  # giving up leaves them be
        first.set_result(None)
        assert not await _returns_within(table.changelog_acknowledged(), 0.3)
        second.set_result(None)
        assert await _returns_within(table.changelog_acknowledged(), 1.0)
        assert producer.take(0) == []
        _write(table, topic, 1, "i/a")  # a later write is waited for again
        await table.send_changelog_writes()
        (third,) = producer.take(1)
        assert not await _returns_within(table.changelog_acknowledged(), 0.3)
        third.set_result(None)
        assert await _returns_within(table.changelog_acknowledged(), 1.0)

    asyncio.run(scenario())


def test_a_changelog_write_that_failed_fails_the_wait(tmp_path) -> None:
    async def scenario() -> None:
        app, table, topic = _app(tmp_path)
        producer = _Handed(table)
        _write(table, topic, 0, "i/a")
        _write(table, topic, 0, "i/b")
        await table.send_changelog_writes()
        first, second = producer.take(2)
        first.set_result(None)
        second.set_exception(RuntimeError("not acknowledged"))
        with pytest.raises(RuntimeError, match="not acknowledged"):
            await table.changelog_acknowledged()
        assert await _returns_within(table.changelog_acknowledged(), 1.0)  # reported once

    asyncio.run(scenario())


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
