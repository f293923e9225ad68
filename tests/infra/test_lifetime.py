"""A consumer's loop stops at SIGTERM (``infra.lifetime.sigterm_stops``): the signal is noted,
not fatal, so the loop ends its batch and commits what it delivered."""

from __future__ import annotations

import os
import signal

from infra.lifetime import sigterm_stops


def test_a_loop_goes_on_until_sigterm_comes_and_then_stops() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        should_stop = sigterm_stops()
        assert not should_stop()
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before kill returns, to this thread
        assert should_stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
