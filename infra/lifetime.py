"""Parents and children of the platform's process trees (a supervisor, a forking server): a
child that must not outlive its parent, a parent that passes a stop on."""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PR_SET_PDEATHSIG = 1
STACKS_SIGNAL = signal.SIGUSR1


def dump_stacks_on_signal(signum: int = STACKS_SIGNAL) -> None:
    """On ``signum``, write every thread's Python stack to stderr (a stage's log) and go on.

    Why: a process that stopped making progress says nothing in its log, and a deadline that
    only stops it leaves no word of where it waited. ``kill -USR1 PID`` (or a test's deadline,
    ``tests/support/rtrl_run.py``) asks; the dump is written from the signal handler itself,
    so it comes even when the main thread is blocked in C or holds the GIL."""
    stream = sys.stderr
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a capture (``main`` in a test)
        stream = sys.__stderr__
    if stream is not None:
        faulthandler.register(signum, file=stream, all_threads=True, chain=False)


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); exit now if the
    parent is already gone. A parent killed with SIGKILL then leaves no orphan holding
    partitions or a port."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)


def forget_interrupt_in_string_exec() -> None:
    """Call once a KeyboardInterrupt is handled, before a ``python -m`` process exits with its own
    code.

    Why: CPython (3.11 here) marks a KeyboardInterrupt that ends a string ``exec`` or ``eval`` as
    unhandled even when a caller catches it; a process started with ``-m`` then kills itself
    with SIGINT at exit (status -2, no traceback) instead of exiting with its code. Imports run
    such code (dataclasses build their methods with a string ``exec``), so a SIGTERM that
    arrives during an import hits it: ``rtrl run`` stopped 0.06 s after it started its stream
    worker exited -2 in 1 of 25 tries, and the suite on four workers failed once so
    (``tests/rtrl/test_run_stop.py``). Every string ``exec`` clears the mark when it starts, and
    one that ends well leaves it clear."""
    exec("pass", {})  # noqa: S102 - a constant: its only effect is clearing the mark


def sigterm_stops() -> Callable[[], bool]:
    """A loop's ``should_stop``: true once this process got SIGTERM, so that a consumer ends
    its batch cleanly (commits what it delivered) instead of dying in the middle of it."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    return lambda: bool(stopping)


@contextmanager
def stop_signals_call(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call ``handler`` (e.g. to pass the stop on to
    children); the previous handlers come back after it."""
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
