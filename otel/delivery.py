"""Delivering one batch of evaluations until the endpoint accepted it: retries with backoff.

The exporter commits a batch's offsets only after this returns, so it never gives up on a
batch it could still deliver: an endpoint that is down or busy (no connection, a timeout,
408, 429, 502, 503, 504, as OTLP/HTTP names the retryable answers) is retried for as long as
it takes, each pause twice the last up to a ceiling, with jitter, and ``Retry-After`` honoured.
Any other refusal (a wrong key: 401, 403; a wrong URL: 404, 405; a payload it will not read:
400, 413) raises :class:`EndpointRefused`: no retry mends it, and the service stops with the
endpoint's own answer rather than pass over rewards it never delivered.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from otel.evaluation import Evaluation

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 429, 502, 503, 504})
SPAN_NOT_FOUND = "span_not_found"  # Phoenix held no span with the reward's response id
ENDPOINT_REJECTED = "endpoint_rejected"  # an OTLP partial success that rejected records


class EndpointRefused(Exception):
    """The endpoint answered with a refusal that no retry mends."""


class RetryLater(Exception):
    """The endpoint could not take the batch now; ``retry_after_s`` if it said when."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeliveryStopped(Exception):
    """The service was asked to stop before the batch was accepted (nothing is committed)."""


@dataclass
class Sent:
    """One attempt's outcome: what the endpoint took, refused by reason, and what must wait
    (a Phoenix span not there yet)."""

    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    waiting: list[Evaluation] = field(default_factory=list)


class Target(Protocol):
    def send(self, evaluations: Sequence[Evaluation]) -> Sent:
        """One attempt: raises RetryLater or EndpointRefused, else says what happened."""
        ...


@dataclass(frozen=True)
class Backoff:
    initial_s: float
    max_s: float

    def delay(self, attempt: int, retry_after_s: float | None = None,
              draw: Callable[[], float] = random.random) -> float:  # fmt: skip
        """Seconds to wait before retry ``attempt`` (1 for the first): the endpoint's own
        ``Retry-After`` when it gave one (capped), else doubling with jitter in [1/2, 1].

        >>> b = Backoff(0.5, 30.0)
        >>> [b.delay(n, draw=lambda: 1.0) for n in (1, 2, 3, 8, 20)]
        [0.5, 1.0, 2.0, 30.0, 30.0]
        >>> b.delay(1, draw=lambda: 0.0), b.delay(3, retry_after_s=7.0), b.delay(1, 99.0)
        (0.25, 7.0, 30.0)
        """
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_s)
        ceiling = min(self.max_s, self.initial_s * 2 ** min(attempt - 1, 32))
        return ceiling * (0.5 + 0.5 * draw())


def classify(status: int, body: str) -> None:
    """Raise for an answer that is not a success; nothing for a 2xx.

    >>> classify(200, "")
    >>> classify(503, "busy")
    Traceback (most recent call last):
    ...
    otel.delivery.RetryLater: the endpoint answered 503: busy
    >>> classify(401, "bad key")
    Traceback (most recent call last):
    ...
    otel.delivery.EndpointRefused: the endpoint refused the batch with 401: bad key
    """
    if 200 <= status < 300:
        return
    if status in RETRYABLE_STATUS:
        raise RetryLater(f"the endpoint answered {status}: {body[:200]}")
    raise EndpointRefused(f"the endpoint refused the batch with {status}: {body[:200]}")


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the delay form; an HTTP date is ignored).

    >>> retry_after_s("3"), retry_after_s(None), retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT")
    (3.0, None, None)
    """
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass
class Delivered:
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    retries: int = 0


def deliver(
    target: Target,
    evaluations: Sequence[Evaluation],
    backoff: Backoff,
    *,
    wait_for_spans_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Delivered:
    """Send until the endpoint took every evaluation, refused some for a stated reason, or
    (Phoenix) their spans stayed missing for ``wait_for_spans_s``. Raises EndpointRefused
    (no retry mends it) or DeliveryStopped (a stop came first)."""
    out = Delivered()
    pending = list(evaluations)
    started = clock()
    attempt = 0
    while pending:
        if should_stop():
            raise DeliveryStopped(f"stopped with {len(pending)} evaluations not delivered")
        try:
            sent = target.send(pending)
        except RetryLater as exc:
            attempt += 1
            out.retries += 1
            pause = backoff.delay(attempt, exc.retry_after_s)
            log.warning("%s; retry %d in %.1f s (%d evaluations wait, nothing committed)",
                        exc, attempt, pause, len(pending))  # fmt: skip
            _sleep_unless_stopped(pause, sleep, clock, should_stop)
            continue
        out.accepted += sent.accepted
        out.rejected.update(sent.rejected)
        pending = sent.waiting
        if pending and clock() - started >= wait_for_spans_s:
            ids = ", ".join(e.response_id for e in pending[:5])
            log.warning("%d evaluations passed: no span of their interaction or response after "
                        "%.0f s (%s%s)", len(pending), wait_for_spans_s, ids,
                        ", ..." if len(pending) > 5 else "")  # fmt: skip
            out.rejected[SPAN_NOT_FOUND] += len(pending)
            break
        if pending:
            attempt += 1
            _sleep_unless_stopped(backoff.delay(attempt), sleep, clock, should_stop)
    return out


def _sleep_unless_stopped(
    seconds: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    should_stop: Callable[[], bool],
) -> None:
    """Sleep in short steps so that a stop is heard within a quarter second."""
    end = clock() + seconds
    while not should_stop():
        left = end - clock()
        if left <= 0:
            return
        sleep(min(left, 0.25))
