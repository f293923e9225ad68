"""The answer deadline (``serving.deadline``): an answer not ready in time is a 504 with its
reason and is cancelled; a stream's first step is bounded the same way, its generating task
cancelled; a timeout of the backend's own is not taken for the deadline."""

from __future__ import annotations

import asyncio

import pytest

from serving.answers import ApiError
from serving.deadline import answered_within, first_step_within


def test_an_answer_past_the_deadline_is_refused_and_cancelled() -> None:
    cancelled = []

    async def slow() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    async def run() -> ApiError:
        with pytest.raises(ApiError) as refused:
            await answered_within(slow(), 0.05)
        return refused.value

    refused = asyncio.run(run())
    assert (refused.status, refused.code) == (504, "deadline_exceeded") and cancelled == [True]
    assert refused.headers == {"Retry-After": "10"}


def test_no_deadline_waits_and_an_inner_timeout_stays_the_backend_s() -> None:
    async def answer() -> str:
        await asyncio.sleep(0.05)
        return "done"

    async def times_out() -> str:
        raise TimeoutError("the backend's own")

    assert asyncio.run(answered_within(answer(), 0)) == "done"
    assert asyncio.run(answered_within(answer(), 5)) == "done"
    with pytest.raises(TimeoutError, match="the backend's own"):
        asyncio.run(answered_within(times_out(), 5))


def test_a_stream_with_no_first_step_in_time_is_refused_its_generation_cancelled() -> None:
    async def run() -> tuple[int, bool]:
        steps: asyncio.Queue[str] = asyncio.Queue()
        generating = asyncio.ensure_future(asyncio.sleep(5))
        try:
            await first_step_within(steps, generating, 0.05)
        except ApiError as exc:
            await asyncio.sleep(0)
            return exc.status, generating.cancelled()
        return 200, False

    assert asyncio.run(run()) == (504, True)
