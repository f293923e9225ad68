"""The processor's :class:`~streams.processor.StateStore` over a changelogged Faust table.

Keys and values are bytes in the table (raw serializers: the processor encodes its own JSON).
Writes go to the store and changelog partition of the current event, which the caller sets to
the processor's partition (``streams.join``), so the changelog stays co-partitioned with input.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


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
