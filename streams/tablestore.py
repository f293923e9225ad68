"""The processor's StateStore over the Faust table's local store, with our own changelog writes.

Faust keeps the table: its RocksDB (or memory) store, the changelog topic it declares, and the
recovery that rebuilds the store from that topic after an unclean stop or on a new owner. Writes
do not go through ``Table.__setitem__``, whose per-key path (current event, sensors, one aiokafka
message each) was a large part of the worker's time: :class:`TableStore` writes the partition's
store directly and hands the same key and value to the :class:`~streams.outbox.Outbox`, for the
table's changelog partition, so the changelog stays co-partitioned with input and keeps the
partition's writes in order. Keys and values are bytes, as Faust's raw serializers write them,
so Faust's recovery reads these writes like its own.

Once the outbox says the writes are acknowledged, :func:`record_changelog_offsets` tells the
store how far the changelog is applied (what Faust's own sent-callback does), so that a clean
restart reads only what came after. The store's private methods used here are listed in
:mod:`streams.faust_internals`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from faust.types import TP

from streams.outbox import Outbox


def changelog_topic(table: Any) -> str:
    return table.changelog_topic.get_topic_name()


class TableStore:
    """One partition's entries: local store first, then the changelog (through the outbox)."""

    def __init__(self, table: Any, partition: int, outbox: Outbox) -> None:
        self.table = table
        self.partition = partition
        self.outbox = outbox
        self.topic = changelog_topic(table)
        self._rocksdb = hasattr(table.data, "_db_for_partition")

    def _local(self) -> Any:
        """The mapping that holds this partition's keys. Looked up on every use: Faust closes
        and reopens a partition's database around rebalances."""
        data = self.table.data
        return data._db_for_partition(self.partition) if self._rocksdb else data.data

    def get(self, key: str) -> bytes | None:
        return self._local().get(key.encode())

    def put(self, key: str, value: bytes) -> None:
        raw_key = key.encode()
        self._local()[raw_key] = value
        self.outbox.send(self.topic, raw_key, value, partition=self.partition)

    def delete(self, key: str) -> None:
        raw_key = key.encode()
        local = self._local()
        if local.get(raw_key) is not None:
            del local[raw_key]
            self.outbox.send(self.topic, raw_key, None, partition=self.partition)

    def items(self) -> Iterator[tuple[str, bytes]]:
        """This partition's entries (RocksDB), or every entry (memory; the caller filters).

        Not ``table.items()`` for RocksDB: Faust lists only the databases it has opened since
        the last rebalance, so a scan right after one can miss a whole partition.
        """
        data = self.table.data
        if self._rocksdb:
            items = data._visible_items(data._db_for_partition(self.partition))
        else:
            items = list(data.data.items())
        for key, value in items:
            yield key.decode(), value


def record_changelog_offsets(table: Any, outbox: Outbox, partitions: set[int]) -> None:
    """The store of each partition holds the changelog up to its highest acknowledged offset."""
    topic = changelog_topic(table)
    for partition in partitions:
        offset = outbox.acked.get((topic, partition))
        if offset is not None:
            table.data.set_persisted_offset(TP(topic, partition), offset)
