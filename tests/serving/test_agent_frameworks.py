"""An unmodified agent framework against `rtrl serve`: the OpenAI Agents SDK on chat
completions, its model pointed at the gateway on the tiny model, a real function tool.

The agent's first call requires a tool (``ModelSettings(tool_choice="required")``: decoded under
the grammar of calls, so even the random tiny model calls it; the tool names its files, as a
repository's tool would, so that the random model's call fits its token budget: the tiny
tokenizer spends a token on every few characters). The SDK runs the tool and, as it does by
default, asks again with ``tool_choice`` reset to auto, the call and its result in the
history. The gateway joins the two calls into one interaction (the second extends the first's
answer by its tool-call id) and splices the second prompt from the first call's tokens.

The same SDK against the llama.cpp engine on SmolLM2: its required call is decoded under the GBNF
grammar of calls by our llama-server (``llamacpp/patches``), so the tool runs on a valid call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from models.catalog import fetch, models_dir
from models.loading import load_base
from tests.support.engine import base_registry, needs_engine
from tests.support.gateway import Serve, ServedSetup, api_key


@pytest.fixture(scope="module")
def served_setup() -> ServedSetup:
    return ServedSetup(options=("--max-tokens", "256"))


def test_the_openai_agents_sdk_runs_a_tool_through_the_gateway(served: tuple[Serve, str]) -> None:
    serve, key = served
    set_tracing_disabled(True)  # the SDK would export its traces to OpenAI otherwise
    read: list[str] = []

    @function_tool
    def read_file(path: Literal["stats.py", "test_stats.py"]) -> str:
        """Read a file of the repository."""
        read.append(path)
        return "def mean(xs):\n    return sum(xs)"

    client = AsyncOpenAI(
        base_url=f"{serve.url}/v1",
        api_key=key,
        max_retries=0,
        default_headers={"X-Rtrl-User-Id": "sdk-user"},
    )
    agent = Agent(
        name="fixer",
        instructions="Fix the bug.",
        model=OpenAIChatCompletionsModel(model="default", openai_client=client),
        model_settings=ModelSettings(tool_choice="required", max_tokens=256),
        tools=[read_file],
    )
    before = serve.metrics()
    result = Runner.run_sync(agent, "mean([]) fails: fix it.", max_turns=3)
    after = serve.metrics()
    assert len(read) == 1  # the tool ran, for real, once
    assert isinstance(result.final_output, str)

    def grew(outcome: str) -> float:
        name = f'rtrl_gateway_calls_total{{outcome="{outcome}"}}'
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert grew("new") == 1 and grew("extends") == 1  # two calls, one run
    assert after['rtrl_gateway_tool_calls_total{outcome="called"}'] >= 1


@pytest.fixture(scope="module")
def served_by_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, str]]:
    """`rtrl serve --engine llama.cpp` on SmolLM2 (nothing recorded or followed)."""
    tmp = tmp_path_factory.mktemp("frameworks-llama")
    base = load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))
    registry = base_registry(tmp / "registry", base, "smol-0000")
    key = api_key(tmp / "keys.sqlite")
    serve = Serve(["--registry", str(registry.root), "--key-db", str(tmp / "keys.sqlite"),
                   "--no-record", "--no-follow", "--engine", "llama.cpp", "--engine-slots", "2",
                   "--max-tokens", "96"], tmp / "serve.log")  # fmt: skip
    yield serve, key
    serve.stop()


@needs_engine
def test_the_openai_agents_sdk_calls_a_tool_on_the_llama_cpp_engine(
    served_by_llama: tuple[Serve, str],
) -> None:
    """The SDK's required first call, on SmolLM2 through llama.cpp, names the tool with an
    argument its schema allows, and the SDK runs it (the run stops at the first tool's result:
    what the model says after it is SmolLM2's business, not the gateway's)."""
    serve, key = served_by_llama
    set_tracing_disabled(True)
    read: list[str] = []

    @function_tool
    def read_file(path: Literal["stats.py", "test_stats.py"]) -> str:
        """Read a file of the repository."""
        read.append(path)
        return "def mean(xs):\n    return sum(xs)"

    client = AsyncOpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0,
                         default_headers={"X-Rtrl-User-Id": "sdk-user"})  # fmt: skip
    agent = Agent(
        name="fixer",
        instructions="Fix the bug.",
        model=OpenAIChatCompletionsModel(model="default", openai_client=client),
        # one call an answer: under the grammar of parallel calls SmolLM2 writes the same call
        # again and again until its budget cuts the last one (then read as text, unclosed_call)
        model_settings=ModelSettings(
            tool_choice="required", parallel_tool_calls=False, max_tokens=96, extra_args={"seed": 7}
        ),
        tools=[read_file],
        tool_use_behavior="stop_on_first_tool",
    )
    before = serve.metrics()
    result = Runner.run_sync(agent, "mean([]) fails: fix it.", max_turns=2)
    after = serve.metrics()
    assert len(read) == 1 and read[0] in ("stats.py", "test_stats.py")  # a valid call, run
    assert result.final_output == "def mean(xs):\n    return sum(xs)"
    called = 'rtrl_gateway_tool_calls_total{outcome="called"}'
    assert after.get(called, 0.0) - before.get(called, 0.0) == 1
