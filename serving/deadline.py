"""The gateway's answer deadline: a request the backend has not answered within
``--answer-deadline-s`` is refused with a 504 ``deadline_exceeded`` and ``Retry-After``, and its
generation is cancelled (llama-server stops decoding a request whose connection closes), instead
of running on past its client's timeout, where it would fail with no reason given.

The slot wait (``serving.slot_ledger``) refuses a request that waits too long for a free slot;
this bounds the whole answer, decoding included, which slows with the machine's load: a CPU
shared with a trainer, or a server's slots all decoding at once (a SmolLM2 soak on two cores:
requests that got a slot within the wait still took over 240 s). A streamed answer is bounded
until its first step: after that its client is being answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from serving.answers import RETRY_AFTER_S, ApiError

T = TypeVar("T")


def deadline_exceeded(deadline_s: float) -> ApiError:
    """The 504 of an answer not ready within the deadline.

    >>> e = deadline_exceeded(240)
    >>> e.status, e.code, e.message.split(":")[0]
    (504, 'deadline_exceeded', 'not answered within 240 s')
    """
    return ApiError(504, f"not answered within {deadline_s:g} s: the server is at capacity; try "
                    "again later", "server_error", "deadline_exceeded",
                    headers={"Retry-After": str(RETRY_AFTER_S)})  # fmt: skip


async def answered_within(answer: Awaitable[T], deadline_s: float) -> T:
    """``answer``, or :func:`deadline_exceeded` once ``deadline_s`` (0: none) has passed, the
    answer cancelled."""
    if deadline_s <= 0:
        return await answer
    scope = asyncio.timeout(deadline_s)
    try:
        async with scope:
            return await answer
    except TimeoutError:
        if scope.expired():
            raise deadline_exceeded(deadline_s) from None
        raise


async def first_step_within(steps: asyncio.Queue[T], answer: asyncio.Task[Any],
                            deadline_s: float) -> T:  # fmt: skip
    """A streamed answer's first step, or :func:`deadline_exceeded` with ``answer`` (the task
    generating it) cancelled."""
    try:
        return await answered_within(steps.get(), deadline_s)
    except ApiError:
        answer.cancel()
        raise
