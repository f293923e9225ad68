"""A chat answer read for tool calls, and its calls put into OpenAI's answer shapes (pure).

The backends sample text; the request's tools decide how it is read (``models.tool_format``):

- ``tool_choice: none`` (or no tools): the text is the answer, as without tools.
- ``auto`` (the default when tools are given): an answer whose calls parse and validate is
  answered with ``message.tool_calls`` and ``finish_reason: "tool_calls"``; one the model wrote
  badly is answered as plain text, its reason counted (``rtrl_gateway_tool_calls_total``),
  never dropped and never repaired.
- ``required`` and a named function: the same reading, of an answer sampled under a grammar
  that admits only such calls (``Reading.constrained``).

Each call gets an id of the gateway's, ``call_`` and 24 hex digits, unique per call: an agent
sends it back with the call's result, and it names the answer that made the call.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from models.generation import Generation
from models.tool_format import (
    MARKER,
    Call,
    Parsed,
    checked_call,
    functions_of,
    parse_calls,
    visible_prefix,
)
from serving.protocol import ChatCompletionRequest, NamedToolChoice

TOOL_CALLS = "tool_calls"


@dataclass(frozen=True)
class Reading:
    """How a chat request's answer is read for calls."""

    tools: tuple[dict[str, Any], ...]
    parallel: bool
    mode: str  # auto, required, or the named function
    constrained: bool  # sampled under a grammar of calls (required, named)


def reading_of(req: ChatCompletionRequest) -> Reading | None:
    """None when the answer is plain text (no tools, or ``tool_choice: none``)."""
    if not req.tools or req.tool_choice == "none":
        return None
    choice = req.tool_choice
    mode = choice.function.name if isinstance(choice, NamedToolChoice) else choice or "auto"
    return Reading(
        tuple(t.model_dump(exclude_none=True) for t in req.tools),
        req.parallel_tool_calls,
        mode,
        constrained=mode != "auto",
    )


def read(gen: Generation, reading: Reading) -> Parsed:
    """The answer read for calls: from its text, or as the upstream read them (served as the
    upstream gave them, valid or not: :func:`upstream_outcomes` counts them)."""
    if gen.tool_calls is None:
        return parse_calls(gen.text, reading.tools, reading.parallel)
    return Parsed(gen.text or None, gen.tool_calls) if gen.tool_calls else Parsed(gen.text)


def upstream_outcomes(gen: Generation, reading: Reading) -> list[str]:
    """What is counted of an answer whose calls an upstream read (``gen.tool_calls`` not None):
    ``text`` for an answer without calls, else one outcome per call, ``called`` or the reason
    the call does not name a tool or validate against its schema (an answer read here has
    one outcome, :func:`outcome`).

    >>> r = Reading(({"type": "function", "function": {"name": "f"}},), True, "auto", False)
    >>> g = Generation("c", None, None, None, None, "", "tool_calls", tool_calls=(
    ...     Call("f", "{}"), Call("g", "{}"), Call("f", "[1]")))
    >>> upstream_outcomes(g, r)
    ['called', 'unknown_function', 'bad_arguments']
    """
    if not gen.tool_calls:
        return ["text"]
    functions = functions_of(reading.tools)
    counted = [checked_call(c.name, c.arguments, functions) for c in gen.tool_calls]
    out = ["called" if isinstance(c, Call) else c for c in counted]
    if not reading.parallel and len(out) > 1:
        out[1:] = ["parallel_not_allowed"] * (len(out) - 1)
    return out


def broken_count(gen: Generation, reading: Reading | None, parsed: Parsed | None) -> int:
    """How many tool calls the answer holds that were broken: each ``<tool_call>`` of an answer
    served as text because a call in it was broken (at least one), none for an answer read as
    calls or plain text; each call an upstream read that does not validate. Calls are counted
    one by one, so an answer with parallel calls counts every call, not the answer. ``parsed``:
    the answer as :func:`read` read it (None: not read, when ``reading`` is None).

    >>> r = Reading(({"type": "function", "function": {"name": "f"}},), True, "auto", False)
    >>> def answer(text): return Generation("c", None, None, None, None, text, "stop")
    >>> def broken(gen): return broken_count(gen, r, read(gen, r))
    >>> broken(answer('<tool_call>\\n{"name": "f"}\\n</tool_call>'))
    0
    >>> broken(answer('<tool_call>\\n{"name": "g"}\\n</tool_call><tool_call>\\n{'))
    2
    """
    if reading is None or parsed is None:
        return 0
    if gen.tool_calls is not None:
        return sum(o not in ("called", "text") for o in upstream_outcomes(gen, reading))
    return max(1, gen.text.count(MARKER)) if parsed.broken is not None else 0


def call_id() -> str:
    return f"call_{secrets.token_hex(12)}"


def tool_calls_of(parsed: Parsed) -> list[dict[str, Any]]:
    """The answer's ``message.tool_calls``, each with a new id."""
    return [
        {
            "id": call_id(),
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for c in parsed.calls
    ]


def outcome(parsed: Parsed) -> str:
    """The counted outcome: ``called``, ``text`` (no call written) or the broken reason."""
    return parsed.broken or ("called" if parsed.calls else "text")


def with_calls(body: dict[str, Any], parsed: Parsed, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole chat answer's body with its ``calls`` (:func:`tool_calls_of` the parsed answer,
    when any parsed) in place of its text."""
    if calls:
        choice = body["choices"][0]
        choice["message"]["content"] = parsed.content
        choice["message"]["tool_calls"] = calls
        choice["finish_reason"] = TOOL_CALLS
    return body


class ShownText:
    """The text a streamed answer with tools may show as it grows: what comes before the
    calls, never a piece of ``<tool_call>``. ``push`` takes each step's text and gives what
    to send now; at the end, :func:`stream_tail` sends the rest (or the calls)."""

    def __init__(self) -> None:
        self.whole = ""
        self.sent = ""

    def push(self, text: str) -> str:
        self.whole += text
        visible = visible_prefix(self.whole)
        new = visible[len(self.sent) :] if visible.startswith(self.sent) else ""
        self.sent += new
        return new


def stream_tail(parsed: Parsed, sent: str, calls: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The deltas that end a streamed answer with tools, before its finish chunk: the text not
    shown yet, then each of ``calls`` whole (its id, name and arguments in one delta)."""
    text = (parsed.content if calls else parsed.content or "") or ""
    rest = text[len(sent) :] if text.startswith(sent) else ""
    if rest:
        yield {"content": rest}
    for index, call in enumerate(calls):
        yield {"tool_calls": [{"index": index, **call}]}
