"""A stand-in for the gateway where an agent's own logic is under test (the gateway has its own
tests): each chat completion is answered with the next scripted message, under one interaction
id, and every request is kept."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai

from ingest.contract import uuid7


class ScriptedGateway:
    """Answers each request with the next scripted message (or response), keeping what it was
    sent: its headers and its body."""

    def __init__(self, *answers: dict[str, Any] | httpx2.Response) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[httpx2.Headers, dict[str, Any]]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append((request.headers, json.loads(request.content)))
        answer = self.answers.pop(0)
        if isinstance(answer, httpx2.Response):
            return answer
        answer = dict(answer)  # a scripted answer may name its finish reason (e.g. ``length``)
        finish = answer.pop("finish_reason", "tool_calls" if "tool_calls" in answer else "stop")
        choice = {"index": 0, "message": {"role": "assistant", **answer}, "finish_reason": finish}
        usage = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
        body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "default",
                "choices": [choice], "usage": usage}  # fmt: skip
        headers = {"x-rtrl-interaction-id": "i_run1", "x-rtrl-checkpoint-id": "ck-1"}
        return httpx2.Response(200, json=body, headers=headers)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The requests' bodies, in the order they came."""
        return [body for _, body in self.sent]

    def client(self) -> openai.OpenAI:
        http = httpx2.Client(transport=httpx2.MockTransport(self))
        return openai.OpenAI(base_url="http://gateway/v1", api_key="k", http_client=http,
                             max_retries=0)  # fmt: skip


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """An answer that calls one tool."""
    call_id = f"call_{uuid7()[-12:]}"
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }
