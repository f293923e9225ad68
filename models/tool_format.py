"""How a model that has no tool format of its own reads tools and writes tool calls: the one
documented default (Hermes style, the format Qwen2.5 and Hermes models were trained on).

The tools go to the model in the system message, as JSON between ``<tools>`` tags; the model
calls one by writing, as its whole answer or after some text,

    <tool_call>
    {"name": "read_file", "arguments": {"path": "src/app.py"}}
    </tool_call>

(several blocks, one per line, for parallel calls), and each result comes back as a ``tool``
message whose content is ``<tool_response>`` … ``</tool_response>``. An earlier assistant turn
with calls is rendered as the model would have written it. Everything here is pure text:
the result goes through the model's own chat template like any other message, on every engine
(transformers, llama.cpp), so the prompt is the same whichever serves it.

:func:`parse_calls` reads an answer back. A call the model wrote badly (not JSON, an unknown
function, arguments that do not validate against the function's schema, a block cut off by the
token budget, text after the calls, several calls where one was allowed) makes the whole answer
plain text with the reason, for the gateway to count: never a call with invented arguments,
never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
RESPONSE_OPEN = "<tool_response>\n"
RESPONSE_CLOSE = "\n</tool_response>"
MARKER = "<tool_call>"  # where an answer's calls start (the rest of CALL_OPEN is whitespace)

PREAMBLE = (
    "You may call one or more functions to assist with the user query. You are provided "
    "with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
ONE_CALL = "\nCall at most one function per answer."

# Why an answer's calls were refused; each is counted by the gateway.
BROKEN_REASONS = (
    "not_json",  # a block's body is not one JSON object
    "no_name",  # no string "name"
    "unknown_function",  # a name the request's tools do not have
    "bad_arguments",  # "arguments" neither an object nor a JSON string of one
    "arguments_invalid",  # arguments that do not validate against the function's schema
    "unclosed_call",  # a block without its closing tag (usually the token budget ran out)
    "text_after_calls",  # anything but whitespace after the last block
    "parallel_not_allowed",  # several calls with parallel_tool_calls false
)
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # a JSON object, serialised as json.dumps does


@dataclass(frozen=True)
class Parsed:
    """An answer read for calls: ``calls`` empty and ``broken`` None for a plain answer."""

    content: str | None  # the text before the calls (None: none), or the whole text
    calls: tuple[Call, ...] = ()
    broken: str | None = None  # a BROKEN_REASONS code: the answer is served as text


def function_of(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``function`` object of an OpenAI tool (``{"type": "function", "function": {...}}``)."""
    function = tool.get("function")
    if tool.get("type", "function") != "function" or not isinstance(function, Mapping):
        raise ValueError("each tool is {'type': 'function', 'function': {...}}")
    if not isinstance(function.get("name"), str) or not function["name"]:
        raise ValueError("each tool's function has a name")
    return function


def preamble(tools: Sequence[Mapping[str, Any]], parallel: bool = True) -> str:
    """The system message's part that lists the tools and how to call them.

    >>> text = preamble([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    >>> text.splitlines()[2], text.splitlines()[-1]
    ('{"type": "function", "function": {"name": "f", "parameters": {}}}', '</tool_call>')
    """
    listed = "\n".join(
        json.dumps({"type": "function", "function": dict(function_of(t))}, ensure_ascii=False)
        for t in tools
    )
    return PREAMBLE.format(tools=listed) + ("" if parallel else ONE_CALL)


def call_text(name: str, arguments: Any) -> str:
    """One call as the model writes it (``arguments``: an object, or its JSON text).

    >>> call_text("f", '{"a": 1}')
    '<tool_call>\\n{"name": "f", "arguments": {"a": 1}}\\n</tool_call>'
    """
    args = json.loads(arguments) if isinstance(arguments, str) else arguments
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"{CALL_OPEN}{body}{CALL_CLOSE}"


def text_of(content: Any) -> str:
    """A message's text: a string as it is, the text parts of a list, "" for none."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return "" if content is None else str(content)


def assistant_text(content: Any, tool_calls: Sequence[Mapping[str, Any]] | None) -> str:
    """An assistant turn as the model would have written it: its text, then its calls."""
    text = text_of(content)
    calls = [
        call_text(str(c["function"]["name"]), c["function"].get("arguments") or "{}")
        for c in tool_calls or ()
    ]
    return "\n".join(([text] if text else []) + calls)


def render(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    parallel: bool = True,
) -> list[dict[str, str]]:
    """Plain ``{role, content}`` messages for the model's own chat template: the tools (when
    given) appended to the system message, or in one of their own first; calls and results as
    text in the default format.

    >>> tools = [{"type": "function", "function": {"name": "f"}}]
    >>> out = render([{"role": "user", "content": "hi"},
    ...               {"role": "assistant", "content": None, "tool_calls": [
    ...                   {"id": "c1", "type": "function",
    ...                    "function": {"name": "f", "arguments": "{}"}}]},
    ...               {"role": "tool", "tool_call_id": "c1", "content": "ok"}], tools)
    >>> [m["role"] for m in out], out[2]["content"], out[3]["content"]
    (['system', 'user', 'assistant', 'tool'], '<tool_call>\\n{"name": "f", "arguments": {}}\\n</tool_call>', '<tool_response>\\nok\\n</tool_response>')
    """  # noqa: E501
    out: list[dict[str, str]] = []
    for m in messages:
        role = str(m["role"])
        if role == "assistant":
            out.append(
                {"role": role, "content": assistant_text(m.get("content"), m.get("tool_calls"))}
            )
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "content": RESPONSE_OPEN + text_of(m.get("content")) + RESPONSE_CLOSE,
                }
            )
        else:
            out.append(
                {
                    "role": "system" if role == "developer" else role,
                    "content": text_of(m.get("content")),
                }
            )
    if tools:
        listed = preamble(tools, parallel)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{listed}"}
        else:
            out.insert(0, {"role": "system", "content": listed})
    return out


def _arguments(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _valid(arguments: dict[str, Any], schema: Any) -> bool:
    if not isinstance(schema, Mapping) or not schema:
        return True
    import jsonschema

    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError:
        return False
    except jsonschema.SchemaError as exc:
        raise ValueError(f"a tool's parameters are not a JSON Schema: {exc.message}") from None
    return True


def checked_call(name: Any, arguments: Any, functions: Mapping[str, Mapping[str, Any]]
                 ) -> Call | str:  # fmt: skip
    """The call of ``name`` with ``arguments`` (an object or its JSON text) when it names one of
    ``functions`` (by name) with arguments that validate, else the BROKEN_REASONS code why not.

    >>> fs = {"f": {"name": "f", "parameters": {"type": "object", "required": ["a"]}}}
    >>> checked_call("f", '{"a": 1}', fs), checked_call("g", {}, fs), checked_call("f", "{", fs)
    (Call(name='f', arguments='{"a": 1}'), 'unknown_function', 'bad_arguments')
    """
    if not isinstance(name, str):
        return "no_name"
    if name not in functions:
        return "unknown_function"
    parsed = _arguments(arguments)
    if parsed is None:
        return "bad_arguments"
    if not _valid(parsed, functions[name].get("parameters")):
        return "arguments_invalid"
    return Call(name, json.dumps(parsed, ensure_ascii=False))


def functions_of(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The tools' functions by name."""
    return {str(f["name"]): f for f in map(function_of, tools)}


def parse_calls(text: str, tools: Sequence[Mapping[str, Any]], parallel: bool = True) -> Parsed:
    """The calls in an answer, or why they cannot be served as calls.

    >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {
    ...     "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
    >>> parse_calls("Sure.\\n" + call_text("f", {"a": 1}), tools)
    Parsed(content='Sure.', calls=(Call(name='f', arguments='{"a": 1}'),), broken=None)
    >>> parse_calls(call_text("f", {"a": "x"}), tools).broken
    'arguments_invalid'
    >>> parse_calls("<tool_call>\\n{\\"name\\": \\"f\\", \\"argu", tools).broken
    'unclosed_call'
    >>> parse_calls("no calls here", tools)
    Parsed(content='no calls here', calls=(), broken=None)
    """
    start = text.find(MARKER)
    if start < 0:
        return Parsed(text)
    functions = functions_of(tools)
    before = text[:start].strip()
    calls: list[Call] = []
    end = start
    for match in _BLOCK.finditer(text, start):
        if text[end : match.start()].strip():
            return Parsed(text, broken="text_after_calls")
        end = match.end()
        try:
            body = json.loads(match.group(1))
        except ValueError:
            return Parsed(text, broken="not_json")
        if not isinstance(body, dict):
            return Parsed(text, broken="not_json")
        call = checked_call(body.get("name"), body.get("arguments", {}), functions)
        if isinstance(call, str):
            return Parsed(text, broken=call)
        calls.append(call)
    rest = text[end:]
    if MARKER in rest:
        return Parsed(text, broken="unclosed_call")
    if rest.strip():
        return Parsed(text, broken="text_after_calls")
    if not parallel and len(calls) > 1:
        return Parsed(text, broken="parallel_not_allowed")
    return Parsed(before or None, tuple(calls))


def visible_prefix(text: str) -> str:
    """What of a still-growing answer may be shown as text: everything before the calls, less
    an ending that could be the start of ``<tool_call>``.

    >>> visible_prefix("Let me look. <tool"), visible_prefix("a <tool_call>\\n{")
    ('Let me look. ', 'a ')
    """
    start = text.find(MARKER)
    if start >= 0:
        return text[:start]
    for k in range(min(len(MARKER) - 1, len(text)), 0, -1):
        if MARKER.startswith(text[-k:]):
            return text[:-k]
    return text
