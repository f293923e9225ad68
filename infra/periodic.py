"""A job run as a service: do a step whenever there is work, look again later when there is none.

The batch builder and the trainer run this way (``--watch``). A stop request (SIGTERM, through
``stop``) is honoured between steps, never in the middle of one; a step that fails for a passing
reason (``retry_on``: Kafka unreachable, a file being replaced) is logged and tried again at the
next look, so a service outlives the outages of what it depends on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


def run_every(step: Callable[[], bool], interval_s: float, stop: threading.Event,
              retry_on: tuple[type[BaseException], ...], log: logging.Logger,
              on_pass: Callable[[str, float], None] | None = None) -> int:  # fmt: skip
    """Call ``step`` until ``stop`` is set: again at once when it did some work (returned True),
    after ``interval_s`` when it found none; returns how many steps did work. ``on_pass`` is
    told each step's outcome (``worked``, ``idle``, ``given_up``) and seconds (the metrics).

    >>> done = threading.Event()
    >>> work = iter([True, True, False])
    >>> def step():
    ...     more = next(work, None)
    ...     if more is None:
    ...         done.set()
    ...         return False
    ...     return more
    >>> run_every(step, 0.01, done, (), logging.getLogger("doctest"))
    2
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    worked = 0
    while not stop.is_set():
        started, outcome = time.monotonic(), "given_up"
        try:
            did_work = step()
            outcome = "worked" if did_work else "idle"
        except retry_on as exc:
            log.warning("given up (%s: %s); trying again in %g s", type(exc).__name__, exc,
                        interval_s)  # fmt: skip
            did_work = False
        if on_pass is not None:
            on_pass(outcome, time.monotonic() - started)
        if did_work:
            worked += 1
        else:
            stop.wait(interval_s)
    return worked
