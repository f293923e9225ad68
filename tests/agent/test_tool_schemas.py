"""The agent's tools close, and a constrained run's requests allow only valid actions: the
first names ``write_file``, the later ones require one of the three tools, and a write's result
shows the tests so a second write can repair."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from agent.tasks import get_task, load_tasks
from agent.tool_agent import AgentSettings, run_agent
from agent.tool_schemas import (
    CONSTRAINED_TOOLS,
    CONTENT_MAX_CHARS,
    all_tools,
    constrained_tools,
    turn_choice,
)
from agent.workspace import MODULE, Workspace
from models.constraint import tool_call_constraint
from tests.support.scripted_gateway import ScriptedGateway, tool_call

TASK = get_task("double")


def _strings(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in schema["properties"].values() if p.get("type") == "string"]


@pytest.mark.parametrize("tool", all_tools(), ids=lambda t: t["function"]["name"])
def test_every_schema_is_closed_and_every_string_bounded(tool: dict[str, Any]) -> None:
    schema = tool["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == sorted(schema["properties"])
    for string in _strings(schema):
        assert "enum" in string or string.get("maxLength", 0) > 0, string


def test_every_reference_solution_is_a_valid_write_and_nothing_else_is() -> None:
    write = next(t for t in constrained_tools() if t["function"]["name"] == "write_file")
    check = jsonschema.Draft202012Validator(write["function"]["parameters"])
    for task in load_tasks("easy", "held_out", "shipped"):
        check.validate({"path": MODULE, "content": task.reference})
    for wrong in (
        {"path": "../etc/passwd", "content": "x"},
        {"path": MODULE, "content": "x" * (CONTENT_MAX_CHARS + 1)},
        {"path": MODULE, "content": "x", "mode": "a"},
        {"path": MODULE},
    ):
        assert not check.is_valid(wrong), wrong


def test_the_constrained_tools_compile_to_a_grammar_for_each_turn() -> None:
    for request in (0, 1, 2):
        constraint = tool_call_constraint(constrained_tools(), turn_choice(request), False)
        assert constraint is not None and not constraint.options.parallel
        assert constraint.options.functions == (
            ("write_file",) if request == 0 else CONSTRAINED_TOOLS
        )
        assert '"additionalProperties": false' in constraint.grammar


def test_a_constrained_run_names_write_file_first_then_requires_one_of_three_tools() -> None:
    wrong = "def double(x):\n    return x + 1\n"
    script = ScriptedGateway(tool_call("write_file", path=MODULE, content=wrong),
                             tool_call("write_file", path=MODULE, content=TASK.reference),
                             tool_call("finish"))  # fmt: skip
    with Workspace(TASK) as repo:
        run = run_agent(script.client(), repo, "u1", AgentSettings(constrained=True))
        assert repo.module() == TASK.reference
    assert run.ended == "finish" and len(script.sent) == 3
    first, *later = script.bodies
    assert first["tool_choice"] == {"type": "function", "function": {"name": "write_file"}}
    assert all(r["tool_choice"] == "required" for r in later)
    for request in script.bodies:
        assert [t["function"]["name"] for t in request["tools"]] == list(CONSTRAINED_TOOLS)
        assert request["parallel_tool_calls"] is False
    # the first write's result shows the failing visible test: the second write repairs it
    shown = script.bodies[1]["messages"][-1]["content"]
    assert shown.startswith(f"wrote {MODULE}") and "FAILED: double(" in shown
    assert script.bodies[2]["messages"][-1]["content"].endswith("2 of 2 tests passed")


def test_an_unconstrained_run_asks_for_no_tool_choice() -> None:
    script = ScriptedGateway(tool_call("finish"))
    with Workspace(TASK) as repo:
        run_agent(script.client(), repo, "u1", AgentSettings())
    assert "tool_choice" not in script.bodies[0]
    assert len(script.bodies[0]["tools"]) == len(all_tools())
