"""The process's lifetime helpers. A consumer's loop stops at SIGTERM
(``infra.lifetime.sigterm_stops``): the signal is noted, not fatal, so the loop ends its batch
and commits what it delivered. The stacks handler registers wherever ``main`` runs."""

from __future__ import annotations

import faulthandler
import io
import os
import signal
import sys

import pytest

from infra.lifetime import dump_stacks_on_signal, sigterm_stops


def test_a_loop_goes_on_until_sigterm_comes_and_then_stops() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        should_stop = sigterm_stops()
        assert not should_stop()
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before kill returns, to this thread
        assert should_stop()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_stacks_handler_registers_where_stderr_is_not_a_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``rtrl.cli.main`` called in a process whose stderr was replaced (a test's capture, an
    embedding program) still runs: the handler writes to the process's own stderr."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    try:
        dump_stacks_on_signal(signal.SIGUSR2)
    finally:
        faulthandler.unregister(signal.SIGUSR2)
