"""The hand-off between ``emit`` (any thread) and the sender: bounded, and drained whole.

``put`` is a lock, a length check and an append, so the editor's thread never waits on the
sender; the sender swaps the whole list out in one step instead of taking events one by one,
which keeps it from starving when a thread emits in a tight loop (each per-item ``get`` would
need the GIL back from the emitter).
"""

from __future__ import annotations

import threading


class Outbox:
    """
    >>> box = Outbox(max_events=2)
    >>> box.put(b"a"), box.put(b"b"), box.put(b"c")
    (True, True, False)
    >>> box.take_all(0.0), box.pending()
    ([b'a', b'b'], 2)
    >>> box.settled(); box.pending()
    0
    """

    def __init__(self, max_events: int) -> None:
        self._max = max_events
        self._items: list[bytes] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._taken = 0

    def put(self, item: bytes) -> bool:
        """False when full (the caller counts the drop)."""
        with self._lock:
            if len(self._items) >= self._max:
                return False
            self._items.append(item)
        if not self._ready.is_set():
            self._ready.set()
        return True

    def wake(self) -> None:
        """End the sender's wait early (flush, close)."""
        self._ready.set()

    def take_all(self, timeout_s: float) -> list[bytes]:
        """Wait up to ``timeout_s`` for events, then take all of them. Until ``settled`` they
        still count as pending."""
        if timeout_s > 0:
            self._ready.wait(timeout_s)
        # Clear before taking: an event put after the take sets the flag again.
        self._ready.clear()
        with self._lock:
            items, self._items = self._items, []
            self._taken = len(items)
        return items

    def settled(self) -> None:
        """What ``take_all`` returned is in the spool now."""
        self._taken = 0

    def pending(self) -> int:
        return len(self._items) + self._taken
