"""Steady traffic keeps its rate whatever the answers take: arrivals are drawn as a Poisson
process, an interaction that fails is counted and the traffic goes on, arrivals the threads
cannot take are shed and counted rather than queued, and a stop waits for what is in flight."""

from __future__ import annotations

import random
import threading
import time

import httpx

from rtrl.worlds.steady_traffic import steady


def test_the_rate_holds_and_failures_are_counted_not_fatal() -> None:
    def one(rng: random.Random) -> float:
        x = rng.random()
        if x < 0.2:
            raise TimeoutError("the gateway did not answer")
        return x

    traffic = steady(one, rate_per_min=1200, stop=lambda: False, duration_s=3.0, threads=4)
    n = traffic.started  # Poisson with mean 60: within 5 standard deviations
    assert 60 - 5 * 60**0.5 < n < 60 + 5 * 60**0.5, n
    assert len(traffic.outcomes) + traffic.failed["TimeoutError"] == n
    assert 0 < traffic.failed["TimeoutError"] < n and traffic.shed == 0


def test_slow_answers_shed_arrivals_and_a_stop_waits_for_those_in_flight() -> None:
    finished: list[int] = []
    stop = threading.Event()

    def slow(rng: random.Random) -> int:
        time.sleep(1.0)
        finished.append(1)
        return 1

    threading.Timer(2.0, stop.set).start()
    traffic = steady(slow, rate_per_min=1200, stop=stop.is_set, threads=2)
    assert traffic.shed > 10  # ~40 arrivals, 2 threads of 1-second answers
    assert len(traffic.outcomes) == traffic.started == len(finished)  # none left in flight
    assert traffic.started <= 10  # the backlog (4), refilled as each second frees 2 threads


def test_a_refusal_with_a_reason_is_counted_by_its_code_apart_from_failures() -> None:
    """A 503 in OpenAI's form with its code (the gateway's ``overloaded``) is a refusal with a
    reason; a 503 without one, or a timeout, is a failure."""
    request = httpx.Request("POST", "http://gateway/v1/chat/completions")
    overloaded = httpx.Response(
        503,
        request=request,
        json={
            "error": {
                "message": "at capacity",
                "type": "server_error",
                "param": None,
                "code": "overloaded",
            }
        },
    )
    bare = httpx.Response(503, request=request, text="Service Unavailable")
    errors = [httpx.HTTPStatusError("503", request=request, response=overloaded),
              httpx.HTTPStatusError("503", request=request, response=bare),
              httpx.ReadTimeout("read timed out", request=request)]  # fmt: skip

    def one(rng: random.Random) -> int:
        raise errors[rng.randrange(3)]

    traffic = steady(one, rate_per_min=1200, stop=lambda: False, duration_s=2.0, threads=4)
    assert traffic.outcomes == [] and traffic.refused.keys() == {"overloaded"}, traffic
    assert traffic.failed.keys() == {"HTTPStatusError", "ReadTimeout"}, traffic
    assert sum(traffic.refused.values()) + sum(traffic.failed.values()) == traffic.started
