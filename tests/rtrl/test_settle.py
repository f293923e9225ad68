"""The loop waits for the reward windows to close counting from the last event sent, so that
work done in between (the held-out evals) is not waited for twice."""

from __future__ import annotations

import time

from rtrl.run.landing import settle


def test_settle_waits_only_what_is_left_since_the_last_event() -> None:
    started = time.monotonic()
    settle(30.0, since=started - 31.0)  # the windows closed while the loop worked
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    settle(0.6, since=started - 0.3)
    assert 0.25 <= time.monotonic() - started < 0.6
    started = time.monotonic()
    settle(0.3)  # from now
    assert time.monotonic() - started >= 0.3
