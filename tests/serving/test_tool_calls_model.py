"""Tool calling on a real model: `rtrl serve` on the tiny model, asked with the official Python
client in every tool-choice mode, whole and streamed, each answer checked against OpenAI's
published schemas.

The tiny model never learned the tool format, so under ``auto`` it writes text; under
``required`` and a named function the gateway decodes under the grammar of calls
(``models.constraint``), so every answer is a call whose arguments validate against the
function's schema, however random the model. An agent's run of calls through it is one
interaction, its second prompt spliced from the first call's tokens.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from models.generation import Generation
from models.rollout import ModelIdentity
from models.sampling import SamplingParams
from serving.rollouts.build import rollout_of
from tests.support.gateway import Serve, ServedSetup
from tests.support.openai_schema import check
from tests.support.tools import ASK, NAMED, SCHEMAS, TOOLS


@pytest.fixture(scope="module")
def served_setup() -> ServedSetup:
    return ServedSetup(options=("--max-tokens", "96"))


def _whole(client: openai.OpenAI, **body: Any) -> dict[str, Any]:
    response = client.chat.completions.with_raw_response.create(model="default", **body)
    data = json.loads(response.text)
    check("CreateChatCompletionResponse", data)
    return data


def _calls_valid(calls: list[dict[str, Any]], names: set[str]) -> None:
    assert calls, "a required call is always made"
    for call in calls:
        assert call["function"]["name"] in names
        jsonschema.validate(
            json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]]
        )


@pytest.mark.parametrize("parallel", [True, False])
def test_required_always_answers_with_valid_calls(client: openai.OpenAI, parallel: bool) -> None:
    for _ in range(4):
        body = _whole(client, messages=ASK, tools=TOOLS, tool_choice="required",
                      parallel_tool_calls=parallel, max_tokens=400)  # fmt: skip
        choice = body["choices"][0]
        assert choice["finish_reason"] == "tool_calls", (body["usage"], choice["message"])
        _calls_valid(choice["message"]["tool_calls"], set(SCHEMAS))
        if not parallel:
            assert len(choice["message"]["tool_calls"]) == 1


def test_a_named_function_is_the_one_called(client: openai.OpenAI) -> None:
    for _ in range(3):
        choice = _whole(client, messages=ASK, tools=TOOLS, tool_choice=NAMED)["choices"][0]
        (call,) = choice["message"]["tool_calls"]
        _calls_valid([call], {"run_tests"})


def test_a_required_call_streams_as_tool_call_deltas(client: openai.OpenAI) -> None:
    with client.chat.completions.with_streaming_response.create(
        model="default", messages=ASK, tools=TOOLS, tool_choice=NAMED, stream=True
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    for chunk in chunks:
        check("CreateChatCompletionStreamResponse", chunk)
    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == ""
    _calls_valid(calls, {"run_tests"})
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_auto_and_none_answer_as_the_schema_says(client: openai.OpenAI) -> None:
    for choice in ("auto", "none"):
        body = _whole(client, messages=ASK, tools=TOOLS, tool_choice=choice)
        assert body["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")


def test_tools_the_grammar_cannot_compile_are_refused(client: openai.OpenAI) -> None:
    size = {"size": {"type": "string", "format": "shoe-size"}}
    odd: Any = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": size}}}]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="default", messages=ASK, tools=odd, tool_choice="required"
        )
    assert refused.value.code == "invalid_tools"


def test_an_agent_run_of_calls_is_one_spliced_interaction(served: tuple[Serve, str]) -> None:
    serve, key = served
    headers = {"Authorization": f"Bearer {key}", "X-Rtrl-User-Id": "agent-1"}

    def ask(messages: list[Any], choice: Any) -> httpx.Response:
        body = {"messages": messages, "tools": TOOLS, "tool_choice": choice,
                "return_token_ids": True, "max_tokens": 96}  # fmt: skip
        answer = httpx.post(
            f"{serve.url}/v1/chat/completions", json=body, headers=headers, timeout=60
        )
        assert answer.status_code == 200, answer.text
        return answer

    first = ask(ASK, NAMED)
    message = first.json()["choices"][0]["message"]
    history = [
        *ASK,
        {"role": "assistant", "content": message["content"], "tool_calls": message["tool_calls"]},
    ]
    history += [
        {"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in message["tool_calls"]
    ]
    second = ask(history, "auto")
    assert second.headers["X-Rtrl-Interaction-Id"] == first.headers["X-Rtrl-Interaction-Id"]
    prefix = first.json()["prompt_token_ids"] + first.json()["choices"][0]["token_ids"]
    assert second.json()["prompt_token_ids"][: len(prefix)] == prefix


def test_a_constrained_answer_records_its_grammar_in_the_rollout() -> None:
    from models.constraint import tool_call_constraint

    constraint = tool_call_constraint(TOOLS, NAMED)
    ident = ModelIdentity("llama", "a" * 64, "b" * 64)
    gen = Generation("c1", ident, (1, 2), (3,), (-0.1,), "x", "stop", constraint=constraint)
    rollout = rollout_of(gen, "i1", SamplingParams(), None, "2026-12-04T10:00:00Z")
    assert not isinstance(rollout, str) and rollout.constraint == constraint
