"""Requests per second per API key: a token bucket each, refilled continuously."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second up to ``burst``; a request takes one.

    >>> clock = [0.0]
    >>> bucket = TokenBucket(rate=2.0, burst=2, clock=lambda: clock[0])
    >>> [bucket.take() for _ in range(3)]
    [True, True, False]
    >>> bucket.wait_s()
    0.5
    >>> clock[0] = 0.5; bucket.take()
    True
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def take(self) -> bool:
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait_s(self) -> float:
        """Seconds until the next token (what ``Retry-After`` says)."""
        self._refill()
        return max(0.0, (1.0 - self._tokens) / self._rate)


class RateLimiter:
    """One bucket per key; keys are only ever authenticated ones, so the map stays small.

    The collector's handlers run on one event loop thread, so no lock is needed.
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self._rate = rate
        self._burst = burst
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def check(self, key_id: str) -> float | None:
        """None when allowed, else the seconds to wait."""
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = TokenBucket(self._rate, self._burst, self._clock)
        return None if bucket.take() else bucket.wait_s()
