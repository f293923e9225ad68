"""The agent's tools as closed JSON Schemas, and which calls each turn of a run may make.

A constrained call (``tool_choice`` ``required`` or a named function) is sampled under a grammar
built from these schemas (``models.constraint``), so a schema that leaves anything open is a
call that may not close within its token budget, and a call cut by its budget is a broken call.
So every object is closed (``additionalProperties: false``), every file name is an enum of the
files the run's repository holds, and every string is bounded (``maxLength``).

The budget: SmolLM2's tokenizer (the shipped GGUF's) writes an easy task's reference solution as
a ``write_file`` call in 52-59 tokens (the end token included), the shipped tasks' longest
(``merge``, 244 characters) in 147. ``CONTENT_MAX_CHARS`` bounds the written file at 256
characters, and ``CALL_MAX_TOKENS`` (192) gives each call more than three times what an easy
task's answer needs; ``bench/agent_pass_rate.py`` measures the share of constrained calls that
close within it (``bench/RESULTS.md``, "Agent pass rate under constraint").

Valid actions by construction (``turn_choice``): the first request names ``write_file`` (the
one action that can solve the task), every later one requires a call among ``write_file``,
``run_tests`` and ``finish`` (one call: no parallel calls), and a write's result shows the
visible tests' report, so that a second write can repair what the first got wrong.

>>> [t["function"]["name"] for t in constrained_tools()]
['write_file', 'run_tests', 'finish']
>>> turn_choice(0), turn_choice(1)
({'type': 'function', 'function': {'name': 'write_file'}}, 'required')
"""

from __future__ import annotations

from typing import Any

from agent.workspace import MODULE, TESTS

CONTENT_MAX_CHARS = 256
"""The longest file a ``write_file`` call may write: the shipped tasks' longest reference is 244
characters, an easy task's at most 41."""
CALL_MAX_TOKENS = 192
"""Tokens per constrained answer: an easy task's reference call takes at most 59 of SmolLM2's."""
FIRST_TOOL = "write_file"
CONSTRAINED_TOOLS = ("write_file", "run_tests", "finish")
"""The tools a constrained run is offered, on every request (the same tools each time, so that
each request's prompt extends the last one's token for token)."""
READABLE = (MODULE, TESTS)
WRITABLE = (MODULE,)

_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a file of the repository.",
        {"path": {"type": "string", "enum": list(READABLE), "description": "file name"}},
    ),
    "write_file": (
        "Write a whole file; the result shows the repository's tests run against it.",
        {
            "path": {"type": "string", "enum": list(WRITABLE), "description": "file name"},
            "content": {
                "type": "string",
                "maxLength": CONTENT_MAX_CHARS,
                "description": "the whole text",
            },
        },
    ),
    "run_tests": ("Run the repository's tests.", {}),
    "finish": ("Say the task is done.", {}),
}


def tool_schema(name: str) -> dict[str, Any]:
    """One tool as an OpenAI function tool: a closed object, every argument required.

    >>> tool_schema("run_tests")["function"]["parameters"]
    {'type': 'object', 'properties': {}, 'required': [], 'additionalProperties': False}
    """
    what, properties = _SCHEMAS[name]
    parameters = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {"name": name, "description": what, "parameters": parameters},
    }


def constrained_tools() -> list[dict[str, Any]]:
    """The tools of a constrained run, in ``CONSTRAINED_TOOLS``' order."""
    return [tool_schema(name) for name in CONSTRAINED_TOOLS]


def all_tools() -> list[dict[str, Any]]:
    """Every tool the agent can carry out (an unconstrained run is offered these)."""
    return [tool_schema(name) for name in _SCHEMAS]


def turn_choice(request: int) -> str | dict[str, Any]:
    """The ``tool_choice`` of a constrained run's request ``request`` (0 the first): the first
    names ``write_file``, the later ones require one call of the offered tools."""
    if request == 0:
        return {"type": "function", "function": {"name": FIRST_TOOL}}
    return "required"
