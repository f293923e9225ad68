"""The changelogged Faust table of the join, and the processor's StateStore over it.

Keys and values are bytes in the table (raw serializers: the processor encodes its own JSON).
Writes go to the store and changelog partition of the current event, which the caller sets to
the processor's partition (:func:`partition_context`), so the changelog stays co-partitioned with
input.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import faust
from faust.streams import _current_event


class ChangelogTable(faust.Table):
    """A table whose changelog writes are sent by the worker, in bulk, and can be awaited until
    Kafka acknowledged them.

    Faust queues each changelog write in a buffer that one task drains message by message,
    and the consumer stops delivering input while that buffer is long: writes of a chunk of
    thousands of interactions then trickle out. Here a write is only recorded;
    :meth:`send_changelog_writes` hands all of them to the producer in one go (same topic,
    partition, serializers and sent-callback as Faust's own path), and
    :meth:`changelog_acknowledged` waits for every acknowledgement.

    ``app.producer.flush()`` is no such wait: Faust's buffer ``flush`` gives up after 0.1 s
    without a message sent (``ProducerBuffer.flush_atmost``), and Faust's own commit trusts the
    same flush. A worker that is slow for a moment and then killed would lose state whose input
    offsets are acked, and committed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unsent: list[Any] = []
        self._unacknowledged: list[asyncio.Future] = []

    def send_changelog(
        self,
        partition: int | None,
        key: Any,
        value: Any,
        key_serializer: Any = None,
        value_serializer: Any = None,
    ) -> Any:
        future = self.changelog_topic.as_future_message(
            key=key,
            value=value,
            partition=partition,
            key_serializer=key_serializer or self.key_serializer,
            value_serializer=value_serializer or self.value_serializer,
            callback=self._on_changelog_sent,
            eager_partitioning=True,
        )
        self._unsent.append(future)
        self._unacknowledged.append(future)
        return future

    async def send_changelog_writes(self) -> None:
        """Hand every recorded write to the producer, in order (it batches them)."""
        while self._unsent:
            unsent, self._unsent = self._unsent, []
            for future in unsent:
                await future.message.channel.publish_message(future, wait=False)

    async def changelog_acknowledged(self) -> None:
        """Return once every changelog write made so far is acknowledged (``acks=all``);
        raise if one failed. Being cancelled leaves the writes alone (unlike ``gather``)."""
        await self.send_changelog_writes()
        while self._unacknowledged:
            waiting = list(self._unacknowledged)
            await asyncio.wait(waiting)
            del self._unacknowledged[: len(waiting)]  # writes made meanwhile stay, at the end
            for future in waiting:
                future.result()  # raises the first failure


class TableStore:
    def __init__(self, table: Any, partition: int) -> None:
        self.table = table
        self.partition = partition

    def get(self, key: str) -> bytes | None:
        return self.table.get(key.encode())

    def put(self, key: str, value: bytes) -> None:
        self.table[key.encode()] = value

    def delete(self, key: str) -> None:
        raw_key = key.encode()
        if raw_key in self.table:
            del self.table[raw_key]

    def items(self) -> Iterator[tuple[str, bytes]]:
        """This partition's entries (RocksDB), or every entry (memory; the caller filters).

        Not ``table.items()`` for RocksDB: Faust lists only the databases it has opened since
        the last rebalance, so a scan right after one can miss a whole partition.
        """
        data = self.table.data
        if hasattr(data, "_db_for_partition"):
            items = data._visible_items(data._db_for_partition(self.partition))
        else:
            items = self.table.items()
        for key, value in items:
            yield key.decode(), value


class _PartitionAnchor:
    """Stands for "an event of this partition" where Faust's table asks for the current event."""

    __slots__ = ("message", "__weakref__")

    def __init__(self, topic: str, partition: int) -> None:
        self.message = SimpleNamespace(topic=topic, partition=partition)


@contextmanager
def partition_context(topic: str, partition: int):
    """Faust's table picks the store and changelog partition from the current event; this
    points it at ``partition`` for writes made outside one event (a chunk, a tick)."""
    anchor = _PartitionAnchor(topic, partition)
    token = _current_event.set(weakref.ref(anchor))  # type: ignore[arg-type]
    try:
        yield
    finally:
        _current_event.reset(token)
