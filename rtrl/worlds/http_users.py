"""Simulated users' side of the gateway: one chat completion over HTTP, as an editor plugin
asks `rtrl serve` (or any OpenAI-compatible server with vLLM's ``return_token_ids``), and the
users' second look at their edits a few seconds later.

The token users of `rtrl run` react to token ids, so they ask for them; the text users (the code
world, `rtrl simulate`) read the answer's text. The gateway names in its headers the interaction,
the checkpoint that served it and the experiment arm, which the users stamp on their events.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ingest.contract import uuid7
from models.sampling import SamplingParams
from rtrl.worlds.user_pool import user_pool

LOOK_AGAIN_S = 3.0
"""How long after reacting the users look at their accepted edits again (keep or revert them):
well inside `rtrl run`'s shortened reward window, so the reward and the A/B see it."""


class Emitter(Protocol):
    """What the users report through: the SDK's client (``ingest.sdk.Client``)."""

    def emit(self, event_type: str, interaction_id: str,
             payload: Mapping[str, Any] | None = None, **fields: Any) -> Any: ...  # fmt: skip


@dataclass(frozen=True)
class Answer:
    interaction_id: str
    token_ids: tuple[int, ...]
    checkpoint_id: str
    experiment: tuple[str, str] | None  # (name, arm)
    latency_ms: int = 0
    """The user's wait for the answer, request sent to answer read: the gateway's real timing
    (its batching and queueing included), which the users report as the interaction's latency."""
    text: str = ""  # the answer's text
    output_tokens: int = 0  # as the gateway counted them


def ask(http: httpx.Client, user_id: str, task: str, params: SamplingParams,
        private: bool = False) -> Answer:  # fmt: skip
    """One chat completion for ``user_id`` asking for ``task``, with its token ids;
    ``private`` (privacy mode) keeps it out of the rollouts."""
    return ask_text(http, user_id, f"Write `{task}` in Python.", params, private, token_ids=True)


def ask_text(http: httpx.Client, user_id: str, prompt: str, params: SamplingParams,
             private: bool = False, token_ids: bool = False) -> Answer:  # fmt: skip
    """One chat completion of ``prompt`` for ``user_id``: its text, and its token ids when
    ``token_ids`` (vLLM's extension); ``private`` (privacy mode) keeps it out of the rollouts."""
    interaction = f"i_{uuid7()}"
    headers = {"X-Rtrl-User-Id": user_id, "X-Rtrl-Interaction-Id": interaction}
    if private:
        headers["X-Rtrl-Privacy-Mode"] = "true"
    request: dict[str, Any] = {
        "model": "default", "max_tokens": params.max_tokens, "temperature": params.temperature,
        "top_p": params.top_p, "messages": [{"role": "user", "content": prompt}],
    }  # fmt: skip
    if params.stop:
        request["stop"] = list(params.stop)
    if token_ids:
        request["return_token_ids"] = True
    sent = time.perf_counter()
    answer = http.post("/v1/chat/completions", json=request, headers=headers)
    answer.raise_for_status()
    latency_ms = round((time.perf_counter() - sent) * 1000)
    body = answer.json()
    choice = body["choices"][0]
    name, _, arm = (answer.headers.get("x-rtrl-experiment") or "").partition(":")
    return Answer(
        answer.headers.get("x-rtrl-interaction-id") or interaction,
        tuple(choice.get("token_ids") or ()),
        answer.headers["x-rtrl-checkpoint-id"],
        (name, arm) if arm else None,
        latency_ms,
        choice["message"]["content"] or "",
        int(body.get("usage", {}).get("completion_tokens", 0)),
    )


def ask_all(http: httpx.Client, asks: Sequence[tuple[str, str]], params: SamplingParams,
            concurrency: int = 16, text: bool = False) -> list[Answer]:  # fmt: skip
    """Every ``(user_id, task)``, ``concurrency`` at a time (the gateway batches them); with
    ``text``, each ``task`` is the whole prompt and the answers come back as text."""

    def one(a: tuple[str, str]) -> Answer:
        return ask_text(http, *a, params) if text else ask(http, *a, params)

    with user_pool(concurrency) as pool:
        return list(pool.map(one, asks))


LaterEvent = tuple[str, str, dict[str, Any], dict[str, Any]]
"""An event to send later: (type, interaction id, payload, stamp)."""


class Later:
    """The users' second looks at their edits, each sent ``delay_s`` after that user reacted.

    Not all after the last user of a round reacted: reacting to a round's answers takes
    minutes when each is graded in a sandbox (1,200 answers of the code world's closing A/B),
    longer than a reward window, and a second look sent after its interaction's window closed
    is a late event that neither the reward nor the A/B's edits-kept reads. Nor at the next
    reaction: an agent run can take minutes to come back, and 483 looks of one agent-world A/B
    waited for the next run past their 20 s windows. A thread of its own sends each look when
    it comes due; :meth:`drain` waits for the rest."""

    def __init__(self, client: Emitter, delay_s: float = LOOK_AGAIN_S) -> None:
        self._client = client
        self._delay_s = delay_s
        self._queue: deque[tuple[float, LaterEvent]] = deque()
        self._due = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._send_when_due, name="rtrl-later",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def append(self, event: LaterEvent) -> None:
        with self._due:
            self._queue.append((time.monotonic() + self._delay_s, event))
            self._due.notify()

    def drain(self) -> None:
        """Send every event still waiting, each at its time, and stop the sending thread."""
        with self._due:
            self._closing = True
            self._due.notify()
        self._thread.join()

    def __len__(self) -> int:
        with self._due:
            return len(self._queue)

    def _send_when_due(self) -> None:
        while True:
            with self._due:
                while not self._queue and not self._closing:
                    self._due.wait()
                if not self._queue:
                    return
                wait = self._queue[0][0] - time.monotonic()
                if wait > 0:
                    self._due.wait(wait)
                    continue
                _, event = self._queue.popleft()
            event_type, interaction_id, payload, stamp = event
            self._client.emit(event_type, interaction_id, payload, **stamp)


def serving(http: httpx.Client) -> str:
    """The checkpoint the gateway serves now (asked in privacy mode: no rollout)."""
    return ask(http, "u_probe", "probe()", SamplingParams(max_tokens=1), private=True).checkpoint_id
