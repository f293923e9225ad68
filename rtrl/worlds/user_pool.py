"""A pool of simulated users that stops at once when its round is interrupted.

``with ThreadPoolExecutor(...)`` waits on the way out for every task it was given, queued ones
included, so a Ctrl-C or SIGTERM in the middle of a round of agent runs (a few minutes each
on two cores) waited for the whole round to play out before `rtrl run` stopped its services.
Here a body that raises drops the asks not yet started and does not wait for those in
flight: they end when the run stops the gateway they talk to."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager


@contextmanager
def user_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A ``workers``-thread pool that, if the block raises, cancels what has not started and
    returns at once; otherwise waits for every task, as the executor's own ``with`` does."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="rtrl-user")
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
