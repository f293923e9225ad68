"""Tools rendered by the model's own chat template, where it defines them.

A template that reads ``tools`` and writes calls as ``<tool_call>`` blocks (Qwen2.5's, Hermes
models') renders the tools, an earlier assistant turn's calls and the tool results itself, in
the words and layout the model was trained on; its answers are read back in the same syntax
as the default format's (``models.tool_format.parse_calls``, and the grammar of calls that
constrained decoding applies). Every other template (SmolLM2's) gets the documented default
format, rendered into plain text before the template sees it.

The messages a template expects are OpenAI's with one difference the Hugging Face convention
makes: a call's ``arguments`` are an object, not its JSON text. ``parallel_tool_calls: false``
is said in the system message, as the default format says it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from models.tool_format import MARKER, ONE_CALL, function_of, text_of


def defines_tools(chat_template: Any) -> bool:
    """Whether a chat template renders tools itself in the syntax the gateway reads.

    >>> defines_tools("{% if tools %}...<tool_call>...{% endif %}"), defines_tools("{{ m }}")
    (True, False)
    """
    return isinstance(chat_template, str) and "tools" in chat_template and MARKER in chat_template


def template_messages(messages: Sequence[Mapping[str, Any]],
                      parallel: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """The messages as the model's own template takes them: roles as the template knows them,
    text contents, calls with object arguments, results with their call's id.

    >>> out = template_messages([
    ...     {"role": "developer", "content": "Be brief."},
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type":
    ...      "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]}],
    ...     parallel=False)
    >>> out[0]["role"], out[0]["content"].endswith("per answer."), out[1]["tool_calls"][0]
    ('system', True, {'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': {'a': 1}}})
    >>> out[2]
    {'role': 'tool', 'content': 'ok', 'tool_call_id': 'c1'}
    """  # noqa: E501
    out: list[dict[str, Any]] = []
    for m in messages:
        role = "system" if m["role"] == "developer" else str(m["role"])
        item: dict[str, Any] = {"role": role, "content": text_of(m.get("content"))}
        if role == "assistant" and m.get("tool_calls"):
            item["tool_calls"] = [_call(c) for c in m["tool_calls"]]
        if role == "tool" and m.get("tool_call_id"):
            item["tool_call_id"] = m["tool_call_id"]
        out.append(item)
    if not parallel:
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": out[0]["content"] + ONE_CALL}
        else:
            out.insert(0, {"role": "system", "content": ONE_CALL.strip()})
    return out


def template_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The tools as the template takes them (OpenAI's form), None when none are offered."""
    if not tools:
        return None
    return [{"type": "function", "function": dict(function_of(t))} for t in tools]


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call["function"]
    arguments = function.get("arguments") or "{}"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # kept as the client sent it: the template shows what the model was told
    return {"id": call.get("id"), "type": "function",
            "function": {"name": function["name"], "arguments": arguments}}  # fmt: skip
