"""A decoding constraint: the grammar a completion was sampled under, as recorded with its rollout.

When an agent asks for ``tool_choice: "required"`` or a named function, the answer must be a
call whose arguments validate, in the model's own tool-call syntax (``models.tool_format``): the
sampler masks every token the grammar cannot continue with (``models.grammar_mask``). A masked
distribution is another distribution than the model's, so the learner must score the tokens
under the same masks or the importance ratio is wrong from the first step: the rollout records
the constraint (the grammar text, the library and version that read it, the options it was
built with) and scoring replays it over the recorded tokens.

The grammar is a Lark grammar for llguidance, the arguments of each function a ``%json`` schema
in it: the text of the default format, exactly ``call_text``'s, with the arguments' JSON in
``json.dumps``'s style (``", "`` and ``": "``, no other whitespace), one call or (parallel) one
or more separated by a newline. After the last call the model may only end its turn.

This module is pure Python (the gateway in front of an upstream imports it without any ML
framework); llguidance is imported only where a grammar is checked.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.tool_format import CALL_CLOSE, CALL_OPEN, function_of

LIBRARY = "llguidance"
NOT_REPLAYABLE = "constraint_not_replayable"
"""The reason code of a recorded constraint that this process cannot replay: counted, never
scored without its masks (that would be another distribution than the one sampled)."""


class ConstraintNotReplayable(ValueError):
    """A recorded constraint that cannot be replayed here: another library or version than the
    installed one, or a recorded token the grammar refuses. ``reason`` is the code for counting,
    the message says which and why."""

    reason = NOT_REPLAYABLE


class ConstraintOptions(BaseModel):
    """What the grammar was built from, besides the tools' schemas."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    functions: tuple[str, ...] = Field(min_length=1, description="the functions a call may name")
    parallel: bool = Field(False, description="one or more calls (else exactly one)")
    item_separator: str = ", "
    key_separator: str = ": "
    whitespace_flexible: bool = False


class Constraint(BaseModel):
    """A grammar and what reads it; recorded with the rollout (``to_json_dict``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    library: str = Field(min_length=1, max_length=64)
    version: str = Field(min_length=1, max_length=64)
    grammar: str = Field(min_length=1, description="the grammar, in ``syntax``")
    options: ConstraintOptions
    syntax: Literal["lark", "gbnf"] = Field(
        "lark",
        description="lark: llguidance's Lark (the local sampler's); gbnf: llama.cpp's GBNF "
        "(llama-server's), read by llguidance for replay without forced tokens "
        "(llguidance_grammar)",
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The record; ``syntax`` only when it is not the default (a Lark constraint is
        recorded as before it had one)."""
        data = self.model_dump(mode="json")
        if self.syntax == "lark":
            data.pop("syntax")
        return data


@functools.cache
def installed_version() -> str:
    """The llguidance version this process decodes and replays with (without importing it)."""
    return importlib.metadata.version(LIBRARY)


def unreplayable_reason(constraint: Constraint) -> str | None:
    """Why this process cannot replay ``constraint`` (None: it can). Another version may read
    the same grammar into other masks, so only the exact version replays.

    >>> c = Constraint(library="outlines", version="1", grammar="start: x",
    ...                options=ConstraintOptions(functions=("f",)))
    >>> unreplayable_reason(c)
    "library 'outlines': only 'llguidance' replays here"
    """
    if constraint.library != LIBRARY:
        return f"library {constraint.library!r}: only {LIBRARY!r} replays here"
    here = installed_version()
    if constraint.version != here:
        return f"{LIBRARY} {constraint.version} recorded, {here} installed"
    return None


def _arguments_schema(function: Mapping[str, Any], options: ConstraintOptions) -> dict[str, Any]:
    """The function's parameters as the schema of its arguments object, with llguidance's
    formatting options (``x-guidance``, read only at a schema's top level)."""
    params = function.get("parameters")
    schema = dict(params) if isinstance(params, Mapping) else {}
    if schema.setdefault("type", "object") != "object":
        raise ValueError(f"function {function['name']!r}: parameters must describe an object")
    schema["x-guidance"] = {
        "item_separator": options.item_separator,
        "key_separator": options.key_separator,
        "whitespace_flexible": options.whitespace_flexible,
    }
    return schema


def _lark(text: str) -> str:
    """A Lark string literal of ``text`` (llguidance reads JSON's escapes)."""
    return json.dumps(text)


def functions_by_name(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each tool's function by its name; two tools of one name are refused."""
    by_name: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        function = function_of(tool)
        if function["name"] in by_name:
            raise ValueError(f"two tools name the function {function['name']!r}")
        by_name[function["name"]] = function
    return by_name


def tool_call_grammar(tools: Sequence[Mapping[str, Any]], options: ConstraintOptions) -> str:
    """The Lark grammar of calls of ``options.functions``, each with its ``parameters`` schema.

    >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    >>> print(tool_call_grammar(tools, ConstraintOptions(functions=("f",))))  # doctest: +ELLIPSIS
    %llguidance {}
    start: call
    call: call_0
    call_0: "<tool_call>\\n{\\"name\\": \\"f\\", \\"arguments\\": " args_0 "}\\n</tool_call>"
    args_0: %json {"type": "object", "x-guidance": {...}}
    """
    by_name = functions_by_name(tools)
    lines = ["%llguidance {}", 'start: call ("\\n" call)*' if options.parallel else "start: call"]
    lines.append("call: " + " | ".join(f"call_{i}" for i in range(len(options.functions))))
    for i, name in enumerate(options.functions):
        if name not in by_name:
            raise ValueError(f"tool_choice names {name!r}, which the tools do not have")
        head = CALL_OPEN + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '
        lines.append(f"call_{i}: {_lark(head)} args_{i} {_lark('}' + CALL_CLOSE)}")
        schema = _arguments_schema(by_name[name], options)
        lines.append(f"args_{i}: %json {json.dumps(schema)}")
    return "\n".join(lines)


_FORCING = "%llguidance {}"
_NO_FORCING = '%llguidance {"no_forcing": true}'


def llguidance_grammar(syntax: str, grammar: str) -> str:
    """``grammar`` as llguidance's matcher takes it. A GBNF grammar is llama-server's, whose
    sampler allows every token whose bytes continue the grammar; llguidance, where the grammar
    forces bytes, allows only their canonical tokens unless told ``no_forcing``, which is how a
    GBNF grammar is read here (else the replayed masks are not the ones llama.cpp applied). A
    Lark grammar is the local sampler's, drawn under llguidance's own masks, forcing included."""
    import llguidance

    if syntax != "gbnf":
        return llguidance.grammar_from("lark", grammar)
    lark = llguidance.grammar_from("gbnf", grammar)
    if not lark.startswith(_FORCING):
        raise ValueError(f"llguidance read the GBNF grammar as {lark[:40]!r}...")
    return llguidance.grammar_from("lark", _NO_FORCING + lark[len(_FORCING) :])


def check_grammar(grammar: str, syntax: str = "lark") -> None:
    """Raise ``ValueError`` with llguidance's message when it cannot compile ``grammar`` (a
    schema keyword or string format it does not support, for example)."""
    import llguidance

    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(
        llguidance_grammar(syntax, grammar)
    )
    if is_error:
        raise ValueError(f"the tools' schemas cannot be decoded under a grammar: {messages[0]}")


def tool_call_options(
    tools: Sequence[Mapping[str, Any]], tool_choice: Any, parallel: bool = True
) -> ConstraintOptions | None:
    """The options of the constraint an OpenAI ``tool_choice`` asks for, or None when it asks
    for none (:func:`tool_call_constraint`); ``ValueError`` for a choice the tools cannot
    satisfy."""
    if tool_choice in (None, "auto", "none"):
        return None
    names = [str(function_of(t)["name"]) for t in tools]
    if not names:
        raise ValueError("tool_choice asks for a call, but there are no tools")
    if tool_choice == "required":
        return ConstraintOptions(functions=tuple(names), parallel=parallel)
    if isinstance(tool_choice, Mapping) and isinstance(tool_choice.get("function"), Mapping):
        name = tool_choice["function"].get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("tool_choice's function has no name")
        return ConstraintOptions(functions=(name,))
    raise ValueError(f"tool_choice: none, auto, required or a function, got {tool_choice!r}")


def tool_call_constraint(
    tools: Sequence[Mapping[str, Any]], tool_choice: Any, parallel: bool = True
) -> Constraint | None:
    """The constraint an OpenAI ``tool_choice`` asks for, or None when it asks for none.

    ``"required"``: a call of any of ``tools`` (one or more when ``parallel``, else exactly
    one); ``{"type": "function", "function": {"name": ...}}``: exactly one call of that function;
    ``"auto"``, ``"none"`` or None: no constraint. ``ValueError`` (with the reason) for a choice
    the tools cannot satisfy or schemas the grammar engine cannot compile: the gateway answers
    such a request 400, never samples it unconstrained.

    >>> tools = [{"type": "function", "function": {"name": "f", "parameters": {
    ...     "type": "object", "properties": {"a": {"type": "integer"}}}}}]
    >>> c = tool_call_constraint(tools, {"type": "function", "function": {"name": "f"}})
    >>> c.library, c.options.functions, c.options.parallel, c.syntax
    ('llguidance', ('f',), False, 'lark')
    >>> tool_call_constraint(tools, "auto") is None
    True
    """
    options = tool_call_options(tools, tool_choice, parallel)
    if options is None:
        return None
    grammar = tool_call_grammar(tools, options)
    check_grammar(grammar)
    return Constraint(
        library=LIBRARY, version=installed_version(), grammar=grammar, options=options
    )
