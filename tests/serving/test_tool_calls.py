"""Tool calling through the gateway, with the official ``openai`` client, every answer and chunk
checked against OpenAI's published schemas.

What is tested is the gateway: how it renders tools, calls and results into the prompt, how it
reads the model's text back into ``message.tool_calls`` (whole and streamed), and how it serves
and counts a call the model wrote badly. So the model here is scripted: a backend that answers
each request with the next text of a list, as a model would sample it token by token, and keeps
the prompt messages it was given. The same gateway on a real model (the tiny one, and the
constrained modes) is tested in ``test_tool_calls_model.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from infra.api_keys import KeyStore
from infra.http_server import http_server
from models.generation import Generation
from models.rollout import ModelIdentity
from models.tool_format import call_text
from serving.api import create_app
from serving.backends.base import BackendRequest
from serving.metrics import GatewayMetrics
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.stream import Step
from tests.support.gateway import api_key
from tests.support.kafka import free_port_block
from tests.support.openai_schema import check

NODE = Path(__file__).parent / "node"

TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the test suite",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
ASK: Any = [{"role": "user", "content": "Fix the failing test."}]


class _Target:
    checkpoint_id = "scripted-0"


class ScriptedModel:
    """A backend whose model answers each request with the next of ``answers``, one character
    a token (ids are the characters' code points), each token's log-probability -0.25."""

    kind = "scripted"
    switches = 0
    current_id = "scripted-0"

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.prompts: list[list[dict[str, Any]]] = []

    def target(self, checkpoint: str, model: str = "") -> Any:
        return _Target()

    def models(self) -> list[str]:
        return [self.current_id]

    def take_up(self, info: Any) -> bool:
        return False

    def pin(self, info: Any) -> None: ...
    def unpin(self, checkpoint_id: str) -> None: ...

    async def chat(self, asked: BackendRequest[Any, ChatCompletionRequest]) -> Generation:
        messages, on_step = asked.request.prompt_messages(), asked.on_step
        self.prompts.append(messages)
        text = self.answers.pop(0)
        ids = tuple(map(ord, text))
        prompt = tuple(map(ord, json.dumps(messages)))[:50]
        if on_step is not None:
            for i, ch in enumerate(text):
                on_step(Step(ch, (ord(ch),), (-0.25,), (ch,), prompt if i == 0 else None))
        ident = ModelIdentity("llama", "a" * 64, "b" * 64)
        return Generation(
            "scripted-0", ident, prompt, ids, (-0.25,) * len(ids), text, "stop", tuple(text)
        )

    async def complete(self, asked: BackendRequest[Any, CompletionRequest]) -> Generation:
        raise NotImplementedError

    def ready(self) -> bool:
        return True

    async def close(self) -> None: ...


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, ScriptedModel, GatewayMetrics]]:
    tmp = tmp_path_factory.mktemp("tools")
    key = api_key(tmp / "keys.sqlite")
    model, metrics = ScriptedModel(), GatewayMetrics()
    keys = KeyStore(tmp / "keys.sqlite")
    port = free_port_block(1)
    server = http_server(create_app(model, None, keys, metrics=metrics), "127.0.0.1", port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield url, key, model, metrics
    server.should_exit = True
    thread.join(timeout=10)
    keys.close()


@pytest.fixture(scope="module")
def client(gateway: tuple[str, str, ScriptedModel, GatewayMetrics]) -> openai.OpenAI:
    url, key, _, _ = gateway
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def _counted(metrics: GatewayMetrics, outcome: str) -> float:
    return (
        metrics.registry.get_sample_value("rtrl_gateway_tool_calls_total", {"outcome": outcome})
        or 0.0
    )


def _raw(client: openai.OpenAI, **body: Any) -> dict[str, Any]:
    response = client.chat.completions.with_raw_response.create(model="scripted-0", **body)
    data = json.loads(response.text)
    check("CreateChatCompletionResponse", data)
    return data


def _stream(client: openai.OpenAI, **body: Any) -> list[dict[str, Any]]:
    with client.chat.completions.with_streaming_response.create(
        model="scripted-0", stream=True, **body
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    for chunk in chunks:
        check("CreateChatCompletionStreamResponse", chunk)
    return chunks


def test_a_call_is_answered_as_tool_calls(client: openai.OpenAI, gateway: Any) -> None:
    _, _, model, metrics = gateway
    before = _counted(metrics, "called")
    model.answers.append("Let me look.\n" + call_text("read_file", {"path": "app.py"}))
    body = _raw(client, messages=ASK, tools=TOOLS)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me look."
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "read_file", "arguments": '{"path": "app.py"}'}
    assert _counted(metrics, "called") == before + 1
    # the client's own types read it
    model.answers.append(call_text("run_tests", {}))
    typed: Any = client.chat.completions.create(model="scripted-0", messages=ASK, tools=TOOLS)
    assert typed.choices[0].message.tool_calls[0].function.name == "run_tests"
    # the tools reached the model in the system message, in the default format
    system = model.prompts[-1][0]
    assert system["role"] == "system" and '"name": "read_file"' in system["content"]


def test_parallel_calls_and_the_one_call_rule(client: openai.OpenAI, gateway: Any) -> None:
    _, _, model, metrics = gateway
    two = call_text("read_file", {"path": "a.py"}) + "\n" + call_text("read_file", {"path": "b.py"})
    model.answers.append(two)
    calls = _raw(client, messages=ASK, tools=TOOLS)["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["path"] for c in calls] == ["a.py", "b.py"]
    assert len({c["id"] for c in calls}) == 2
    before = _counted(metrics, "parallel_not_allowed")
    model.answers.append(two)
    body = _raw(client, messages=ASK, tools=TOOLS, parallel_tool_calls=False)
    assert body["choices"][0]["message"]["content"] == two  # served as text, never cut to one
    assert body["choices"][0]["finish_reason"] == "stop"
    assert _counted(metrics, "parallel_not_allowed") == before + 1
    assert "at most one function" in model.prompts[-1][0]["content"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '<tool_call>\n{"name": "read_file", "arguments": {"path": 3}}\n</tool_call>',
            "arguments_invalid",
        ),
        ('<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>', "unknown_function"),
        ("<tool_call>\n{name: read_file}\n</tool_call>", "not_json"),
        ('<tool_call>\n{"name": "read_file", "arguments": {"pa', "unclosed_call"),
        (call_text("run_tests", {}) + " and done", "text_after_calls"),
    ],
)
def test_a_call_written_badly_is_served_as_text_and_counted(
    client: openai.OpenAI, gateway: Any, text: str, reason: str
) -> None:
    _, _, model, metrics = gateway
    before = _counted(metrics, reason)
    model.answers.append(text)
    choice = _raw(client, messages=ASK, tools=TOOLS)["choices"][0]
    assert choice["message"]["content"] == text and "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    assert _counted(metrics, reason) == before + 1


def test_a_streamed_call_shows_no_piece_of_it_as_text(client: openai.OpenAI, gateway: Any) -> None:
    _, _, model, _ = gateway
    model.answers.append("Reading it.\n" + call_text("read_file", {"path": "app.py"}))
    chunks = _stream(client, messages=ASK, tools=TOOLS, stream_options={"include_usage": True})
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    text = "".join(d.get("content") or "" for d in deltas)
    assert "<tool" not in text and text.startswith("Reading it.")
    calls = [tc for d in deltas for tc in d.get("tool_calls") or []]
    assert [(c["index"], c["function"]["name"]) for c in calls] == [(0, "read_file")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "app.py"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    # the client's stream reader assembles the same call
    model.answers.append(call_text("run_tests", {}))
    stream: Any = client.chat.completions.create(
        model="scripted-0",
        messages=ASK,
        tools=TOOLS,
        stream=True,
    )
    names = [
        tc.function.name
        for event in stream
        for choice in event.choices
        for tc in choice.delta.tool_calls or []
        if tc.function is not None
    ]
    assert names == ["run_tests"]


def test_a_streamed_broken_call_ends_as_its_whole_text(client: openai.OpenAI, gateway: Any) -> None:
    _, _, model, _ = gateway
    text = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    model.answers.append(text)
    chunks = _stream(client, messages=ASK, tools=TOOLS)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_tool_choice_none_offers_no_tools(client: openai.OpenAI, gateway: Any) -> None:
    _, _, model, _ = gateway
    written = call_text("run_tests", {})
    model.answers.append(written)
    body = _raw(client, messages=ASK, tools=TOOLS, tool_choice="none")
    assert body["choices"][0]["message"]["content"] == written  # read as text, not as a call
    assert all("<tools>" not in m["content"] for m in model.prompts[-1])


def test_a_history_of_calls_and_results_is_rendered_as_the_model_wrote_it(
    client: openai.OpenAI, gateway: Any
) -> None:
    _, _, model, _ = gateway
    model.answers.append(call_text("read_file", {"path": "app.py"}))
    first = _raw(client, messages=ASK, tools=TOOLS)["choices"][0]["message"]
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": first["tool_calls"]},
        {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "def f(): ..."},
    ]
    model.answers.append("The bug is in f.")
    body = _raw(client, messages=history, tools=TOOLS)
    assert body["choices"][0]["message"]["content"] == "The bug is in f."
    prompt = model.prompts[-1]
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "tool"]
    assert prompt[2]["content"] == call_text("read_file", {"path": "app.py"})
    assert prompt[3]["content"] == "<tool_response>\ndef f(): ...\n</tool_response>"


def test_tool_requests_that_cannot_be_answered_are_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="only allowed when tools"):
        client.chat.completions.create(model="scripted-0", messages=ASK, tool_choice="required")
    named: Any = {"type": "function", "function": {"name": "deploy"}}
    with pytest.raises(openai.BadRequestError, match="not a tool"):
        client.chat.completions.create(
            model="scripted-0",
            messages=ASK,
            tools=TOOLS,
            tool_choice=named,
        )


def test_constrained_modes_are_refused_where_the_backend_cannot_constrain(
    client: openai.OpenAI, gateway: Any
) -> None:
    """Never a ``required`` answer that is not a call: a backend without grammar-constrained
    decoding refuses the mode instead of sampling freely."""
    _, _, model, _ = gateway
    choices: list[Any] = ["required", {"type": "function", "function": {"name": "run_tests"}}]
    for choice in choices:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="scripted-0",
                messages=ASK,
                tools=TOOLS,
                tool_choice=choice,
            )
        assert refused.value.code == "unsupported_tool_choice"
    assert not model.answers  # nothing was asked of the model


def test_the_official_node_client_calls_tools(gateway: Any) -> None:
    """The Node client's whole and streamed answers with calls validate against OpenAI's
    schemas, and its next call, the calls and their results sent back, joins the first's
    interaction."""
    url, key, model, _ = gateway
    node = shutil.which("node")
    assert node is not None, "Node is required (scripts/bootstrap installs the client)"
    model.answers.extend(
        [
            call_text("read_file", {"path": "app.py"}),
            "Reading.\n" + call_text("run_tests", {}),
            "The bug is in f.",
        ]
    )
    env = {**os.environ, "RTRL_URL": f"{url}/v1", "RTRL_KEY": key, "RTRL_TOOLS": json.dumps(TOOLS)}
    done = subprocess.run(
        [node, "tool_calls.mjs"], cwd=NODE, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    check("CreateChatCompletionResponse", out["whole"])
    (call,) = out["whole"]["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "read_file"
    for chunk in out["stream"]:
        check("CreateChatCompletionStreamResponse", chunk)
    streamed = [
        tc["function"]["name"]
        for chunk in out["stream"]
        for choice in chunk["choices"]
        for tc in choice["delta"].get("tool_calls") or []
    ]
    assert streamed == ["run_tests"]
    check("CreateChatCompletionResponse", out["next"])
    assert out["next"]["choices"][0]["message"]["content"] == "The bug is in f."
    assert out["next_interaction"] == out["whole_interaction"]


def test_each_rollout_records_how_many_of_its_calls_were_broken(
    tmp_path: Path, kafka_bootstrap: str, topic_names: Any
) -> None:
    """The rollout of an answer served as text because its calls were broken says how many
    (each ``<tool_call>`` of it, counted call by call), so that the learner charges the
    penalty to that turn; an answer read as calls records none. Through the real recorder to
    Kafka. Without the count (the gateway passing 0, as before) the first check fails."""
    from serving.rollouts.recorder import RolloutRecorder
    from tests.support.gateway import rollouts

    key = api_key(tmp_path / "keys.sqlite")
    model, keys = ScriptedModel(), KeyStore(tmp_path / "keys.sqlite")
    recorder = RolloutRecorder(kafka_bootstrap, topic_names.rollouts, hand_over_s=0.05)
    port = free_port_block(1)
    server = http_server(create_app(model, recorder, keys), "127.0.0.1", port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0)
    broken = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call><tool_call>\n{"na'
    try:
        for interaction, text in (("broken-2", broken), ("called", call_text("run_tests", {}))):
            model.answers.append(text)
            client.chat.completions.create(
                model="scripted-0", messages=ASK, tools=TOOLS, max_tokens=200,
                extra_headers={"X-Rtrl-Interaction-Id": interaction},
            )  # fmt: skip
        got = rollouts(kafka_bootstrap, topic_names.rollouts, 2)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        recorder.close()
        keys.close()
    assert got["broken-2"].turn is not None and got["broken-2"].turn.broken_calls == 2
    assert got["called"].turn is not None and got["called"].turn.broken_calls == 0
