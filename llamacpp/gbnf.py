"""The grammar of tool calls as llama-server reads it (GBNF), equivalent to the Lark grammar the
local sampler decodes under (``models.constraint``): the same call syntax (the default tool
format, ``call_text``'s), and arguments that validate against each function's JSON Schema.

Each schema becomes GBNF by llama.cpp's own converter (``SchemaConverter``, the Python
``json_schema_to_grammar`` of the pinned version: ``llamacpp.build.ensure_schema_converter``),
one converter for all the functions, each schema visited under its own rule name
(``args-<i>``). Two things are tightened after the conversion, so that the text is
``json.dumps``'s as in the Lark grammar: the converter's optional space after ``,``, ``:`` and
each value becomes exactly one space after ``,`` and ``:`` and none elsewhere; and a string's
character is JSON's (this version's converter lets a raw control character, a newline for one,
into a string, which no JSON parser takes).

The rollout records the GBNF text (``Constraint.syntax == "gbnf"``) and the learner replays it
with llguidance, which reads GBNF (``models.grammar_mask``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from models.constraint import (
    LIBRARY,
    Constraint,
    ConstraintOptions,
    check_grammar,
    functions_by_name,
    installed_version,
    tool_call_options,
)
from models.tool_format import CALL_CLOSE, CALL_OPEN

SYNTAX = "gbnf"
JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[\w-]+|\s+|.')
_SPACED = {'","': '", "', '":"': '": "'}
# what this version's converter enforces (or, as ``description``, need not); a bounded integer
# becomes the enum of its values (the converter ignores ``minimum`` and ``maximum``)
KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "enum", "const", "minLength", "maxLength", "pattern", "format",
    "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "description", "title",
    "default", "examples", "minimum", "maximum",
})  # fmt: skip
MAX_ENUM = 1024  # the most values a bounded integer's enum has


def enforceable(schema: Any, where: str = "parameters") -> Any:
    """``schema`` with each bounded integer as the enum of its values; ``ValueError`` for a
    keyword the converter would drop (the grammar must never let through arguments that do not
    validate).

    >>> enforceable({"type": "integer", "minimum": 0, "maximum": 2})
    {'type': 'integer', 'enum': [0, 1, 2]}
    >>> enforceable({"type": "number", "multipleOf": 2})
    Traceback (most recent call last):
    ...
    ValueError: parameters: the GBNF converter cannot enforce 'multipleOf'
    """
    if isinstance(schema, list):
        return [enforceable(item, f"{where}[{i}]") for i, item in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    for key in schema:
        if key not in KEYWORDS:
            raise ValueError(f"{where}: the GBNF converter cannot enforce {key!r}")
    out = {}
    for key, value in schema.items():
        walk = key in ("properties", "$defs", "definitions")
        out[key] = (
            {k: enforceable(v, f"{where}.{k}") for k, v in value.items()}
            if walk and isinstance(value, dict)
            else value
            if key in ("enum", "const", "default", "examples", "required")
            else enforceable(value, f"{where}.{key}")
        )
    return _bounded(out, where)


def _bounded(schema: dict[str, Any], where: str) -> dict[str, Any]:
    if "minimum" not in schema and "maximum" not in schema:
        return schema
    low, high = schema.get("minimum"), schema.get("maximum")
    if schema.get("type") != "integer" or not isinstance(low, int) or not isinstance(high, int):
        raise ValueError(f"{where}: the GBNF converter bounds only integers, on both sides")
    if high - low + 1 > MAX_ENUM:
        raise ValueError(f"{where}: more than {MAX_ENUM} integers between the bounds")
    rest = {k: v for k, v in schema.items() if k not in ("minimum", "maximum")}
    return rest | {"enum": [v for v in range(low, high + 1) if v in rest.get("enum", [v])]}


@functools.cache
def schema_converter(path: Path) -> ModuleType:
    """The converter's module, loaded from the file the pinned sdist ships."""
    spec = importlib.util.spec_from_file_location("llamacpp_schema_converter", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    vars(module)["_build_repetition"] = _counted(vars(module)["_build_repetition"])
    return module


def _counted(build: Callable[..., str]) -> Callable[..., str]:
    """The converter's repetition rule, written ``(item){m,n}`` where it has no separator.

    The converter spells "at most n" as n nested optionals, ``(a (a (a)?)?)?``: a content
    string of at most 256 characters (the agent's ``write_file``) becomes 256 levels deep, which
    llguidance's reader of GBNF refuses (recursion depth). llama.cpp's grammars and llguidance's
    both read the counted form.
    """

    def counted(
        item_rule: str,
        min_items: int,
        max_items: int | None,
        separator_rule: str | None = None,
        item_rule_is_literal: bool = False,
    ) -> str:
        if separator_rule or item_rule_is_literal or max_items is None or max_items <= 1:
            return build(item_rule, min_items, max_items, separator_rule, item_rule_is_literal)
        return f"({item_rule}){{{min_items},{max_items}}}"

    return counted


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal.

    >>> print(gbnf_literal('<a>\\n{"b": '))
    "<a>\\n{\\"b\\": "
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


def tight(rule: str) -> str:
    """A converted rule with ``json.dumps``'s spacing: one space after ``,`` and ``:``, none
    elsewhere (the converter puts an optional ``space`` after each).

    >>> tight('"{" space a-kv ( "," space b-kv )? "}" space')
    '"{" a-kv ( ", " b-kv )? "}"'
    >>> tight('"\\\\"a\\\\"" space ":" space string')
    '"\\\\"a\\\\"" ": " string'
    """
    tokens = _TOKEN.findall(rule)
    kept: list[str] = []
    for at, token in enumerate(tokens):
        if token == "space":
            continue
        following = next((t for t in tokens[at + 1 :] if not t.isspace()), None)
        kept.append(_SPACED[token] if token in _SPACED and following == "space" else token)
    return re.sub(r"\s+", " ", "".join(kept)).strip()


def _arguments_rules(
    converter_module: ModuleType, schemas: Sequence[dict[str, Any]]
) -> tuple[list[str], dict[str, str]]:
    """Each schema's rule name and every rule the converter made for them, tightened."""
    converter = converter_module.SchemaConverter(
        prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
    )
    names = []
    for i, schema in enumerate(schemas):
        resolved = converter.resolve_refs(schema, f"args-{i}")
        names.append(converter.visit(resolved, f"args-{i}"))
    rules = {name: tight(rule) for name, rule in converter._rules.items() if name != "space"}
    if "char" in rules:
        rules["char"] = JSON_CHAR
    return names, rules


def tool_call_gbnf(
    tools: Sequence[Mapping[str, Any]], options: ConstraintOptions, converter: ModuleType
) -> str:
    """The GBNF grammar of calls of ``options.functions``, each with its ``parameters``
    schema: the text of ``models.constraint.tool_call_grammar``'s calls, in GBNF."""
    by_name = functions_by_name(tools)
    schemas = []
    for name in options.functions:
        if name not in by_name:
            raise ValueError(f"tool_choice names {name!r}, which the tools do not have")
        params = by_name[name].get("parameters")
        schema = dict(params) if isinstance(params, Mapping) else {}
        if schema.setdefault("type", "object") != "object":
            raise ValueError(f"function {name!r}: parameters must describe an object")
        schemas.append(enforceable(schema, f"function {name!r}"))
    arg_rules, rules = _arguments_rules(converter, schemas)
    lines = ['root ::= call ("\\n" call)*' if options.parallel else "root ::= call"]
    lines.append("call ::= " + " | ".join(f"call-{i}" for i in range(len(options.functions))))
    for i, name in enumerate(options.functions):
        head = CALL_OPEN + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '
        lines.append(f"call-{i} ::= {gbnf_literal(head)} {arg_rules[i]} "
                     f"{gbnf_literal('}' + CALL_CLOSE)}")  # fmt: skip
    lines.extend(f"{name} ::= {rule}" for name, rule in sorted(rules.items()))
    return "\n".join(lines)


def gbnf_tool_call_constraint(
    tools: Sequence[Mapping[str, Any]],
    tool_choice: Any,
    parallel: bool,
    converter_path: Path,
) -> Constraint | None:
    """The constraint ``tool_choice`` asks for, as a GBNF grammar (``syntax: gbnf``), or None
    when it asks for none; ``ValueError`` as ``models.constraint.tool_call_constraint``'s."""
    options = tool_call_options(tools, tool_choice, parallel)
    if options is None:
        return None
    grammar = tool_call_gbnf(tools, options, schema_converter(converter_path))
    check_grammar(grammar, SYNTAX)
    return Constraint(
        library=LIBRARY,
        version=installed_version(),
        grammar=grammar,
        options=options,
        syntax=SYNTAX,
    )
