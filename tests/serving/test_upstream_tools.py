"""Tools passed through `rtrl serve --upstream` to an OpenAI-compatible upstream, as to vLLM:
the upstream renders them with its model's template and reads the calls itself; the gateway
serves the calls with ids of its own, recognises an agent's next call by them, and refuses the
rollout of an answer the upstream decoded under a constraint it cannot record.

The upstream is a real `rtrl serve` of the tiny model (it reads tools and decodes ``required``
and named calls under a grammar of calls), the front a real `rtrl serve --upstream` recording
to Kafka; every answer and chunk is checked against OpenAI's published schemas. With the tools
rendered by the front instead (``--upstream-tools render``, what the gateway did before), the
constrained modes are refused, as on any backend that cannot decode under a grammar."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from tests.support.gateway import Serve, api_key, rollouts
from tests.support.openai_schema import check
from tests.support.tools import ASK, NAMED, SCHEMAS, TOOLS

GATEWAY_ID = re.compile(r"call_[0-9a-f]{24}")
REFUSED = 'rtrl_gateway_rollouts_refused_total{reason="constraint_not_replayable"}'


@pytest.fixture
def servers(
    tmp_path: Path, registry: Any, kafka_bootstrap: str, topic_names: Any
) -> Iterator[tuple[Serve, Serve, str]]:
    """The upstream, a front passing tools to it and one rendering them, and an API key."""
    key = api_key(tmp_path / "keys.sqlite")
    common = ["--registry", str(registry.root), "--checkpoint", "t-0000",
              "--key-db", str(tmp_path / "keys.sqlite"),
              "--bootstrap", kafka_bootstrap]  # fmt: skip
    upstream = Serve([*common, "--no-record", "--no-follow", "--max-tokens", "96"],
                     tmp_path / "upstream.log", wait=False)  # fmt: skip
    fronts = [
        Serve(
            [
                *common,
                "--topic-prefix",
                topic_names.prefix,
                "--no-follow",
                "--upstream",
                upstream.url,
                "--upstream-model",
                "default",
                "--adapter-dir",
                str(tmp_path / "adapters"),
                "--upstream-tools",
                tools,
            ],
            tmp_path / f"front-{tools}.log",
            env={"RTRL_UPSTREAM_API_KEY": key},
            wait=False,
        )  # fmt: skip
        for tools in ("pass", "render")
    ]
    try:
        for server in (upstream, *fronts):
            server.wait_ready()
        yield fronts[0], fronts[1], key
    finally:
        for server in (*fronts, upstream):
            server.stop()


def _calls_valid(calls: list[dict[str, Any]], names: set[str]) -> None:
    assert calls
    for call in calls:
        assert GATEWAY_ID.fullmatch(call["id"]), call["id"]  # the front's id, not the upstream's
        assert call["function"]["name"] in names
        arguments = json.loads(call["function"]["arguments"])
        jsonschema.validate(arguments, SCHEMAS[call["function"]["name"]])


def test_tools_pass_through_to_the_upstream_and_its_calls_make_one_run(
    servers: tuple[Serve, Serve, str], kafka_bootstrap: str, topic_names: Any
) -> None:
    front, rendering, key = servers
    headers = {"Authorization": f"Bearer {key}", "X-Rtrl-User-Id": "agent-1"}

    def ask(messages: list[Any], choice: Any, **extra: Any) -> httpx.Response:
        body = {"model": "default", "messages": messages, "tools": TOOLS, "tool_choice": choice,
                "max_tokens": 96, **extra}  # fmt: skip
        answer = httpx.post(f"{front.url}/v1/chat/completions", json=body, headers=headers,
                            timeout=120)  # fmt: skip
        assert answer.status_code == 200, answer.text
        return answer

    # required: the upstream decoded under its grammar; the front serves the calls with its ids
    first = ask(ASK, "required")
    check("CreateChatCompletionResponse", first.json())
    choice = first.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    _calls_valid(choice["message"]["tool_calls"], set(SCHEMAS))

    # a named function, streamed: the calls arrive as tool_call deltas
    with httpx.stream("POST", f"{front.url}/v1/chat/completions", headers=headers, timeout=120,
                      json={"model": "default", "messages": ASK, "tools": TOOLS,
                            "tool_choice": NAMED, "stream": True}) as streamed:  # fmt: skip
        lines = [line for line in streamed.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    for chunk in chunks:
        check("CreateChatCompletionStreamResponse", chunk)
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls") or ()]
    assert [d["function"]["name"] for d in deltas] == ["run_tests"] * len(deltas) and deltas
    _calls_valid(deltas, {"run_tests"})
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"

    # the agent's next call, without the interaction header: the history carries the front's
    # call ids, so the call extends the first answer and joins its interaction
    message = choice["message"]
    history = [*ASK, {"role": "assistant", "content": message["content"],
                      "tool_calls": message["tool_calls"]}]  # fmt: skip
    history += [{"role": "tool", "tool_call_id": c["id"], "content": "2 passed"}
                for c in message["tool_calls"]]  # fmt: skip
    second = ask(history, "auto", logprobs=True)
    check("CreateChatCompletionResponse", second.json())
    interaction = first.headers["X-Rtrl-Interaction-Id"]
    assert second.headers["X-Rtrl-Interaction-Id"] == interaction

    # the official client, tools passed the same way
    client = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)
    named = client.chat.completions.create(
        model="default", messages=ASK, tools=TOOLS, tool_choice=NAMED,
        extra_headers={"X-Rtrl-Interaction-Id": "named-client"},
    )  # fmt: skip
    calls = named.choices[0].message.tool_calls or []
    names = [c.function.name for c in calls if c.type == "function"]
    assert names and set(names) == {"run_tests"}

    counts = front.metrics_when(REFUSED, 3)
    assert counts[REFUSED] == 3  # required, named streamed, named by the client: not replayable
    assert counts['rtrl_gateway_tool_calls_total{outcome="called"}'] >= 3

    # the rollouts: only the unconstrained call is recorded, in the run's interaction, with the
    # upstream's own token ids and log-probabilities
    got = rollouts(kafka_bootstrap, topic_names.rollouts, None)
    assert set(got) == {interaction}
    rollout = got[interaction]
    assert rollout.constraint is None
    served = second.json()["choices"][0]["logprobs"]["content"]
    assert [t["logprob"] for t in served] == list(rollout.logprobs)

    # the same front rendering the tools instead cannot ask for a constrained answer
    refused = httpx.post(
        f"{rendering.url}/v1/chat/completions",
        json={"model": "default", "messages": ASK, "tools": TOOLS, "tool_choice": "required"},
        headers=headers,
        timeout=60,
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "unsupported_tool_choice"
