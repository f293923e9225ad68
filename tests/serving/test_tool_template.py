"""A model whose own chat template renders tools (Qwen2.5's and Hermes models' way: it reads
``tools`` and writes ``<tool_call>`` blocks) gets its tools, calls and results rendered by that
template, not by the default format; its answers are read, and constrained, in the same
syntax; an agent's second call is still spliced from the first's tokens. `rtrl serve` on a
copy of the tiny model whose template is such a one."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from transformers import AutoTokenizer

from models.tool_format import PREAMBLE
from models.tool_template import defines_tools
from tests.support.gateway import Serve, ServedSetup

# a small Hermes-style template with tools, in the shape of Qwen2.5's
TEMPLATE = """{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}You help.{% endif %}

# Tools (own template)
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call one as <tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'system' %}
{%- elif m.role == 'assistant' %}<|im_start|>assistant
{{ m.content or '' }}{% for c in m.tool_calls or [] %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
TOOLS: Any = [{"type": "function", "function": {
    "name": "run_tests", "parameters": {
        "type": "object", "properties": {"only": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["only"], "additionalProperties": False}}}]  # fmt: skip
ASK: Any = [{"role": "user", "content": "Fix the failing test."}]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """The tiny model with the template above."""
    out = tmp_path_factory.mktemp("own-template") / "model"
    shutil.copytree(tiny_model, out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def served_setup(model: Path) -> ServedSetup:
    return ServedSetup(options=("--max-tokens", "128"), model=model)


def test_the_template_is_recognised_and_the_default_is_not(model: Path, tiny_model: Path):
    assert defines_tools(AutoTokenizer.from_pretrained(model).chat_template)
    assert not defines_tools(AutoTokenizer.from_pretrained(tiny_model).chat_template)


def test_tools_calls_and_results_are_rendered_by_the_models_own_template(
    served: tuple[Serve, str], model: Path
) -> None:
    serve, key = served
    tokenizer = AutoTokenizer.from_pretrained(model)
    headers = {"Authorization": f"Bearer {key}", "X-Rtrl-User-Id": "agent-own"}

    def ask(messages: list[Any], choice: Any) -> dict[str, Any]:
        body = {"messages": messages, "tools": TOOLS, "tool_choice": choice,
                "return_token_ids": True, "max_tokens": 128}  # fmt: skip
        answer = httpx.post(
            f"{serve.url}/v1/chat/completions", json=body, headers=headers, timeout=60
        )
        assert answer.status_code == 200, answer.text
        return {**answer.json(), "interaction": answer.headers["X-Rtrl-Interaction-Id"]}

    first = ask(ASK, "required")  # constrained: a call in the template's own syntax
    prompt = tokenizer.decode(first["prompt_token_ids"])
    assert "# Tools (own template)" in prompt and '"name": "run_tests"' in prompt
    assert PREAMBLE.splitlines()[0] not in prompt  # not the default format's words
    message = first["choices"][0]["message"]
    assert "tool_calls" in message, (message, first["choices"][0]["finish_reason"])
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "run_tests"
    history = [*ASK, {"role": "assistant", "content": message["content"],
                      "tool_calls": message["tool_calls"]},
               {"role": "tool", "tool_call_id": call["id"], "content": "2 passed"}]  # fmt: skip
    second = ask(history, "auto")
    assert second["interaction"] == first["interaction"]  # one run of calls
    prefix = first["prompt_token_ids"] + first["choices"][0]["token_ids"]
    assert second["prompt_token_ids"][: len(prefix)] == prefix  # spliced, not re-tokenised
    continuation = tokenizer.decode(second["prompt_token_ids"][len(prefix) :])
    # the result as the template renders it: a user turn holding the tool response
    assert "<|im_start|>user\n<tool_response>\n2 passed\n</tool_response>" in continuation
