"""What happened to emitted events, counted: the one place a plugin looks to see loss."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CounterSnapshot:
    queued: int = 0
    """Accepted by ``emit`` into the hand-off queue."""
    spooled: int = 0
    """Moved from the queue into the spool (on disk: durable against a process crash)."""
    sent: int = 0
    """Acknowledged by the collector as accepted."""
    retried: int = 0
    """Events sent again after a retryable failure (counted once per retry)."""
    rejected: int = 0
    """Refused by the collector (4xx or a per-event rejection); reported to ``on_rejected``."""
    dropped: int = 0
    """Lost on the client: queue full, spool over its bound, or left in a memory spool at close."""
    invalid: int = 0
    """Refused by ``emit`` itself: the event broke the contract."""
    sampled_out: int = 0
    """Not kept by sampling."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Counters:
    """Thread-safe counters; ``emit`` and the sender thread both add to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(CounterSnapshot().as_dict(), 0)

    def add(self, name: str, n: int = 1) -> None:
        if n:
            with self._lock:
                self._values[name] += n

    def snapshot(self) -> CounterSnapshot:
        """A consistent copy.

        >>> c = Counters(); c.add("sent", 3); c.snapshot().sent
        3
        """
        with self._lock:
            return CounterSnapshot(**self._values)

    def reset_lock(self) -> None:
        """After ``fork`` the lock may be held by a thread that does not exist in the child."""
        self._lock = threading.Lock()
