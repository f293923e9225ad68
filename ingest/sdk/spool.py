"""The offline buffer between ``emit`` and the collector, behind one small Protocol.

Events enter with ``add``, leave only when ``ack``-ed as done; until then ``next_batch`` offers the
oldest again, so a retried batch carries the very same events. A spool is bounded by count and by
bytes: when full, the oldest events are dropped and ``add`` says how many. Two implementations:
``MemorySpool`` here and ``SqliteSpool`` (``disk_spool``), which survives a crash of the process.
A spool is used by one thread at a time (the sender).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SpoolBatch:
    """The oldest events of a spool: ``ids`` are the spool's own handles for ``ack``."""

    ids: tuple[int, ...]
    events: tuple[bytes, ...]

    def __len__(self) -> int:
        return len(self.ids)


class Spool(Protocol):
    def add(self, events: list[bytes]) -> int:
        """Keep ``events``; returns how many of the oldest were dropped to stay in bounds."""
        ...

    def next_batch(self, max_events: int, max_bytes: int) -> SpoolBatch:
        """The oldest events, at most ``max_events`` and ``max_bytes`` (but at least one)."""
        ...

    def ack(self, batch: SpoolBatch, retry: bool) -> None:
        """Done with ``batch``: forget it, or (``retry``) keep it to be offered again."""
        ...

    def size(self) -> int: ...

    def close(self) -> None: ...


# What keeping one event costs beyond its bytes (bytes object header, ordered-dict entry), so
# that ``max_bytes`` bounds the memory actually used, not only the payloads.
ENTRY_OVERHEAD_BYTES = 120


class MemorySpool:
    """A bounded in-memory spool: survives collector outages, not a crash of the process.

    >>> s = MemorySpool(max_events=2, max_bytes=1000)
    >>> s.add([b"a", b"b", b"c"])
    1
    >>> b = s.next_batch(10, 100); b.events
    (b'b', b'c')
    >>> s.ack(b, retry=True); s.next_batch(1, 100).events
    (b'b',)
    >>> s.ack(b, retry=False); s.size()
    0
    """

    def __init__(self, max_events: int, max_bytes: int) -> None:
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._items: OrderedDict[int, bytes] = OrderedDict()
        self._bytes = 0
        self._next_id = 0

    def add(self, events: list[bytes]) -> int:
        for event in events:
            self._items[self._next_id] = event
            self._next_id += 1
            self._bytes += len(event) + ENTRY_OVERHEAD_BYTES
        dropped = 0
        while self._items and (
            len(self._items) > self._max_events or self._bytes > self._max_bytes
        ):
            _, event = self._items.popitem(last=False)
            self._bytes -= len(event) + ENTRY_OVERHEAD_BYTES
            dropped += 1
        return dropped

    def next_batch(self, max_events: int, max_bytes: int) -> SpoolBatch:
        ids: list[int] = []
        events: list[bytes] = []
        total = 0
        for key, event in self._items.items():
            if len(ids) >= max_events or (ids and total + len(event) > max_bytes):
                break
            ids.append(key)
            events.append(event)
            total += len(event)
        return SpoolBatch(tuple(ids), tuple(events))

    def ack(self, batch: SpoolBatch, retry: bool) -> None:
        if retry:
            return
        for key in batch.ids:
            event = self._items.pop(key, None)  # already gone if dropped for room meanwhile
            if event is not None:
                self._bytes -= len(event) + ENTRY_OVERHEAD_BYTES

    def size(self) -> int:
        return len(self._items)

    def close(self) -> None:
        pass
