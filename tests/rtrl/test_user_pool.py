"""A round interrupted while its users are queued stops at once: the asks not yet started are
dropped. Broken once on purpose: with the executor's own ``with`` (which the agent world and the
code world's users had) the interrupted block waited for all 40 asks, 2 s, and this failed."""

from __future__ import annotations

import threading
import time

import pytest

from rtrl.worlds.user_pool import user_pool


def test_an_interrupted_round_drops_the_asks_not_started() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def ask(k: int) -> int:
        with lock:
            started.append(k)
        time.sleep(0.1)
        return k

    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt), user_pool(2) as pool:
        answers = pool.map(ask, range(40))
        next(answers)  # the first answer is in: the round is under way
        raise KeyboardInterrupt  # Ctrl-C, or SIGTERM through the run's handler
    assert time.monotonic() - began < 1.0
    time.sleep(0.3)  # the asks in flight end; none of the queued ones starts after them
    assert len(started) <= 6


def test_a_round_that_ends_waits_for_every_ask() -> None:
    with user_pool(2) as pool:
        futures = [pool.submit(time.sleep, 0.05) for _ in range(6)]
    assert all(f.done() for f in futures)
