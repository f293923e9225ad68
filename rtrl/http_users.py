"""Simulated users' side of the gateway: one chat completion over HTTP, as an editor plugin
asks `rtrl serve` (or any OpenAI-compatible server with vLLM's ``return_token_ids``).

The users of `rtrl run` react to token ids, so they ask for them; the gateway names in its
headers the interaction, the checkpoint that served it and the experiment arm, which the users
stamp on their events.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from ingest.contract import uuid7
from models.sampling import SamplingParams


@dataclass(frozen=True)
class Answer:
    interaction_id: str
    token_ids: tuple[int, ...]
    checkpoint_id: str
    experiment: tuple[str, str] | None  # (name, arm)
    latency_ms: int = 0
    """The user's wait for the answer, request sent to answer read: the gateway's real timing
    (its batching and queueing included), which the users report as the interaction's latency."""


def ask(http: httpx.Client, user_id: str, task: str, params: SamplingParams,
        private: bool = False) -> Answer:  # fmt: skip
    """One chat completion for ``user_id`` asking for ``task``, with its token ids;
    ``private`` (privacy mode) keeps it out of the rollouts."""
    interaction = f"i_{uuid7()}"
    headers = {"X-Rtrl-User-Id": user_id, "X-Rtrl-Interaction-Id": interaction}
    if private:
        headers["X-Rtrl-Privacy-Mode"] = "true"
    sent = time.perf_counter()
    answer = http.post(
        "/v1/chat/completions",
        json={"model": "default", "return_token_ids": True, "max_tokens": params.max_tokens,
              "temperature": params.temperature, "top_p": params.top_p,
              "messages": [{"role": "user", "content": f"Write `{task}` in Python."}]},
        headers=headers,
    )  # fmt: skip
    answer.raise_for_status()
    latency_ms = round((time.perf_counter() - sent) * 1000)
    name, _, arm = (answer.headers.get("x-rtrl-experiment") or "").partition(":")
    return Answer(
        answer.headers.get("x-rtrl-interaction-id") or interaction,
        tuple(answer.json()["choices"][0]["token_ids"] or ()),
        answer.headers["x-rtrl-checkpoint-id"],
        (name, arm) if arm else None,
        latency_ms,
    )


def ask_all(http: httpx.Client, asks: Sequence[tuple[str, str]], params: SamplingParams,
            concurrency: int = 16) -> list[Answer]:  # fmt: skip
    """Every ``(user_id, task)``, ``concurrency`` at a time (the gateway batches them)."""
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda a: ask(http, a[0], a[1], params), asks))


def serving(http: httpx.Client) -> str:
    """The checkpoint the gateway serves now (asked in privacy mode: no rollout)."""
    return ask(http, "u_probe", "probe()", SamplingParams(max_tokens=1), private=True).checkpoint_id
