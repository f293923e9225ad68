"""Steady traffic: interactions arriving at a set rate (a Poisson process) until told to stop,
each run on a pool of threads, as the users of a product arrive whether or not the last answer
came back.

Arrivals the pool cannot take (more waiting than twice its threads: the gateway is slower than
the rate) are shed and counted, not queued without end; an interaction the gateway refused with
a reason (an error answer in OpenAI's form with its ``code``: ``overloaded`` when every slot of
its server stayed busy) is counted by that code; one that fails otherwise (another 5xx, a
timeout, a lost connection) is counted by its error's type, and the traffic goes on. A log line
each ``progress_s`` says how it goes.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import httpx

log = logging.getLogger("rtrl.simulate")
T = TypeVar("T")


@dataclass
class Traffic(Generic[T]):
    """What the traffic did: each finished interaction's outcome, and what did not happen."""

    outcomes: list[T] = field(default_factory=list)
    failed: Counter[str] = field(default_factory=Counter)  # by the error's type
    refused: Counter[str] = field(default_factory=Counter)  # by the gateway's reason code
    shed: int = 0  # arrivals dropped: every thread busy and the backlog full
    started: int = 0
    seconds: float = 0.0


def steady(
    one: Callable[[random.Random], T],
    rate_per_min: float,
    stop: Callable[[], bool],
    *,
    seed: int = 0,
    threads: int = 4,
    duration_s: float = 0.0,
    progress_s: float = 60.0,
    traffic: Traffic[T] | None = None,
) -> Traffic[T]:
    """Call ``one`` (given a random generator of its own, seeded from ``seed``) at
    ``rate_per_min`` a minute on average, until ``stop()`` or ``duration_s`` (0: no end); then
    wait for the interactions in flight and return what happened (into ``traffic`` when given,
    which another thread may read as it fills)."""
    if rate_per_min <= 0:
        raise ValueError("rate_per_min must be > 0")
    rng, traffic = random.Random(seed), traffic if traffic is not None else Traffic[T]()
    started = time.monotonic()
    end = started + duration_s if duration_s > 0 else float("inf")
    next_at, next_log = started, started + progress_s
    pending: list[Future[T]] = []
    with ThreadPoolExecutor(threads, thread_name_prefix="rtrl-user") as pool:
        while not stop() and time.monotonic() < end:
            now = time.monotonic()
            pending = _collect(pending, traffic)
            if now >= next_log:
                _say(traffic, now - started, len(pending))
                next_log += progress_s
            if now < next_at:
                time.sleep(min(next_at - now, 0.2))
                continue
            next_at += rng.expovariate(rate_per_min / 60.0)
            if len(pending) >= 2 * threads:
                traffic.shed += 1
                continue
            pending.append(pool.submit(one, random.Random(rng.getrandbits(64))))
            traffic.started += 1
        log.info("stopping: waiting for %d interactions in flight", len(pending))
        for future in pending:
            _take(future, traffic)
    traffic.seconds = time.monotonic() - started
    _say(traffic, traffic.seconds, 0)
    return traffic


def _collect(pending: list[Future[T]], traffic: Traffic[T]) -> list[Future[T]]:
    """The futures still running; the finished ones' outcomes taken into ``traffic``."""
    running = []
    for future in pending:
        if future.done():
            _take(future, traffic)
        else:
            running.append(future)
    return running


def _take(future: Future[T], traffic: Traffic[T]) -> None:
    try:
        traffic.outcomes.append(future.result())
    except Exception as exc:  # one user's failed interaction; the others go on
        if (code := refusal_code(exc)) is not None:
            traffic.refused[code] += 1
            return
        traffic.failed[type(exc).__name__] += 1
        if sum(traffic.failed.values()) <= 5:
            log.warning("an interaction failed: %s: %s", type(exc).__name__, exc)


def refusal_code(exc: BaseException) -> str | None:
    """The reason code of an error answer in OpenAI's form (``{"error": {"code": ...}}``), None
    for any other failure (a timeout, a lost connection, an error without a code)."""
    if not isinstance(exc, httpx.HTTPStatusError):
        return None
    try:
        code = exc.response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) and code else None


def _say(traffic: Traffic[T], seconds: float, in_flight: int) -> None:
    done = len(traffic.outcomes)
    failed, refused = sum(traffic.failed.values()), sum(traffic.refused.values())
    log.info("%d interactions done in %.0f s (%.1f a minute), %d in flight, %d failed%s, %d "
             "refused%s, %d shed", done, seconds, 60 * done / seconds if seconds else 0.0,
             in_flight, failed, f" {dict(traffic.failed)}" if failed else "", refused,
             f" {dict(traffic.refused)}" if refused else "", traffic.shed)  # fmt: skip
