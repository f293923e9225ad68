"""When to retry a request and how long to wait: named constants and one backoff function.

A batch keeps its events (and so their ``event_id``s) across retries; the collector's stream
drops duplicates. Network errors, 408, 429 and 5xx are retried with capped exponential backoff and
jitter, waiting at least what ``Retry-After`` asks; any other 4xx is final.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

BASE_DELAY_S = 0.5
"""Wait before the first retry (before jitter)."""
MULTIPLIER = 2.0
MAX_DELAY_S = 30.0
"""Cap of the exponential part: an outage of hours is retried every ~30 s, not every hour."""
MAX_RETRY_AFTER_S = 300.0
"""A ``Retry-After`` beyond this is treated as this (a misconfigured server must not stall us)."""
RETRYABLE_4XX = frozenset({408, 429})


def is_retryable(status: int | None) -> bool:
    """``None`` stands for no HTTP answer at all (connection refused, timeout).

    >>> [is_retryable(s) for s in (None, 200, 400, 401, 408, 429, 500, 503)]
    [True, False, False, False, True, True, True, True]
    """
    return status is None or status in RETRYABLE_4XX or status >= 500


def backoff_delay(
    attempt: int, retry_after_s: float | None = None, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait before retry number ``attempt`` (1 = first retry).

    "Equal jitter": half the capped exponential delay is fixed, half random, so clients that
    failed together spread out yet none retries immediately. ``Retry-After`` is a floor.

    >>> backoff_delay(1, rand=lambda: 0.0), backoff_delay(1, rand=lambda: 1.0)
    (0.25, 0.5)
    >>> backoff_delay(30, rand=lambda: 1.0)
    30.0
    >>> backoff_delay(1, retry_after_s=7, rand=lambda: 0.5)
    7.0
    """
    exponential = min(MAX_DELAY_S, BASE_DELAY_S * MULTIPLIER ** max(0, attempt - 1))
    delay = exponential / 2 + exponential / 2 * rand()
    if retry_after_s is not None:
        delay = max(delay, min(float(retry_after_s), MAX_RETRY_AFTER_S))
    return delay


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds or an HTTP date (RFC 9110 §10.2.3).

    >>> parse_retry_after("3"), parse_retry_after(None), parse_retry_after("soon")
    (3.0, None, None)
    >>> parse_retry_after("Mon, 30 Nov 2026 02:00:10 GMT",
    ...                   now=datetime(2026, 11, 30, 2, 0, 0, tzinfo=UTC))
    10.0
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
