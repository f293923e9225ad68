"""The agent harness: what a model's text does, and the telemetry that says so.

The serving side of a coding agent turns each response into actions; the platform learns only
from the telemetry of those actions, so the mapping is defined once, here, and the simulated
users, the candidate evals and a real product all read text the same way.

How a response is read (``docs/agent-harness.md`` says the same for product teams):

* **Fenced blocks** (three or more backticks or tildes, CommonMark style; an unclosed fence runs to
  the end, as when generation stopped at ``max_tokens``). A block whose info string is ``tool``, or
  a ``json`` or unlabelled block whose body starts with ``{"tool":``, is a *tool call*. Every other
  block with a non-blank line is an *edit*: ``agent.edit_proposed`` with ``lines_added`` = its
  non-blank lines and ``lines_removed`` = 0, except a ``diff``/``patch`` block, whose ``+`` and
  ``-`` lines are counted (``+++``/``---`` headers apart).
* **Bare tool calls**: outside fences, a line that starts (after spaces) with ``{"tool":`` begins
  a tool call; its JSON may run over several lines.
* **A tool call** is one JSON object ``{"tool": NAME, "args": {...}}``; ``args`` may be left out
  when the tool needs none, and no other key is allowed. It is ``agent.tool_call`` with
  ``valid: true`` when it parses, names a known tool and gives that tool's required arguments;
  otherwise ``valid: false``. Telemetry never carries text the model wrote: a known tool is named,
  an unknown one is reported as ``"unknown"``, one that does not parse as ``"malformed"``.
* **A question**: prose (outside fences, tool calls and inline code) with a ``?`` that ends a
  sentence. A response with a question and no edit is ``agent.clarifying_question``; a question
  beside an edit is not (the agent acted).
* **Sub-agents**: a valid call of the sub-agent tool (``subagent``, args ``task``) starts one; it
  is reported as ``agent.subagent_finished`` with ``contributed`` true when the response goes on
  to propose an edit (the only way its result can be used within the turn).
* ``interaction.completed`` carries the latency and output tokens that the caller measured.

>>> turn = Harness().read('Here it is:\\n```python\\ndef f():\\n    return 1\\n```')
>>> [e.lines_added for e in turn.edits], turn.clarifying
([2], False)
>>> [(e.type, e.payload) for e in Harness().events(turn, latency_ms=80, output_tokens=12)]
... # doctest: +NORMALIZE_WHITESPACE
[('agent.edit_proposed', {'edit_id': 'e1', 'lines_added': 2, 'lines_removed': 0}),
 ('interaction.completed', {'latency_ms': 80, 'output_tokens': 12})]
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SUBAGENT_TOOL = "subagent"
UNKNOWN_TOOL = "unknown"  # reported name of a call to a tool the harness does not know
MALFORMED_TOOL = "malformed"  # reported name of a call that does not parse
TOOL_FENCE = "tool"
DIFF_FENCES = frozenset({"diff", "patch"})
PYTHON_FENCES = frozenset({"", "python", "py", "python3"})

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
_TOOL_START = re.compile(r'^\s*\{\s*"tool"\s*:')
_TOOL_NAME = re.compile(r'"tool"\s*:\s*"(?P<name>[^"\\]{1,128})"')
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_QUESTION = re.compile(r"\?(?=[\s\"')\]]|$)")


@dataclass(frozen=True)
class ToolSpec:
    """A tool the agent may call, and the arguments a call must give."""

    name: str
    required_args: tuple[str, ...] = ()


DEFAULT_TOOLS = (
    ToolSpec("read_file", ("path",)),
    ToolSpec("search", ("query",)),
    ToolSpec("run_tests"),
    ToolSpec(SUBAGENT_TOOL, ("task",)),
)


class CallProblem(enum.StrEnum):
    """Why a tool call is invalid."""

    malformed = "malformed"  # not one JSON object of the tool-call shape
    unknown_tool = "unknown_tool"  # names no tool the harness knows
    missing_args = "missing_args"  # a known tool without its required arguments
    refused = "refused"  # well formed, but cannot be carried out (a path outside the repo)
    length = "length"  # cut by the answer's token budget before it closed


@dataclass(frozen=True)
class Edit:
    """A proposed code edit: one fenced block."""

    edit_id: str  # "e1", "e2", ... in the order of the text; unique within the interaction
    language: str  # the fence's info string ("" when none)
    code: str  # the block's body
    lines_added: int
    lines_removed: int


@dataclass(frozen=True)
class ToolCall:
    tool: str  # the name telemetry reports: a known tool, UNKNOWN_TOOL or MALFORMED_TOOL
    problem: CallProblem | None  # None: valid
    args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class Turn:
    """What one response does, in the order of its text."""

    actions: tuple[Edit | ToolCall, ...]
    asked: bool  # its prose holds a question

    @property
    def edits(self) -> tuple[Edit, ...]:
        return tuple(a for a in self.actions if isinstance(a, Edit))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(a for a in self.actions if isinstance(a, ToolCall))

    @property
    def clarifying(self) -> bool:
        """A question instead of acting: asked, and proposed no edit."""
        return self.asked and not self.edits

    @property
    def subagents(self) -> tuple[ToolCall, ...]:
        return tuple(c for c in self.tool_calls if c.valid and c.tool == SUBAGENT_TOOL)

    def code(self) -> str:
        """The code of every Python edit (fence ``python``, ``py``, ``python3`` or none), in
        order: what a task's tests are run against. A shell or diff block is no module."""
        return "\n\n".join(e.code for e in self.edits if e.language in PYTHON_FENCES)


@dataclass(frozen=True)
class AgentEvent:
    """One event the serving side emits: its type and payload (events-v1), without envelope."""

    type: str
    payload: dict[str, object]


@dataclass(frozen=True)
class Harness:
    """Reads responses against a set of known tools."""

    tools: tuple[ToolSpec, ...] = DEFAULT_TOOLS

    def __post_init__(self) -> None:
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names) or {UNKNOWN_TOOL, MALFORMED_TOOL} & set(names):
            raise ValueError("tool names are unique and not 'unknown' or 'malformed'")

    def read(self, text: str) -> Turn:
        """The actions of one response (see the module's docstring for the syntax)."""
        actions: list[Edit | ToolCall] = []
        prose: list[str] = []
        lines = text.splitlines(keepends=True)
        i = 0
        while i < len(lines):
            opening = _FENCE.match(lines[i])
            if opening:
                body, i = _fenced_body(lines, i + 1, opening["fence"])
                edit_id = f"e{sum(isinstance(a, Edit) for a in actions) + 1}"
                action = self._block(opening["info"].lower(), body, edit_id)
                if action is not None:
                    actions.append(action)
            elif _TOOL_START.match(lines[i]):
                call, i, tail = self._bare_call(lines, i)
                actions.append(call)
                prose.append(tail)
            else:
                prose.append(lines[i])
                i += 1
        spoken = _INLINE_CODE.sub("", "".join(prose))
        return Turn(tuple(actions), bool(_QUESTION.search(spoken)))

    def events(self, turn: Turn, *, latency_ms: int, output_tokens: int) -> list[AgentEvent]:
        """The turn's telemetry: its actions in order, then the sub-agents that finished, the
        clarifying question if it is one, and ``interaction.completed`` last."""
        if latency_ms < 0 or output_tokens < 0:
            raise ValueError("latency_ms and output_tokens are >= 0")
        out = []
        for action in turn.actions:
            if isinstance(action, Edit):
                payload: dict[str, object] = {
                    "edit_id": action.edit_id,
                    "lines_added": action.lines_added,
                    "lines_removed": action.lines_removed,
                }
                out.append(AgentEvent("agent.edit_proposed", payload))
            else:
                out.append(
                    AgentEvent("agent.tool_call", {"tool": action.tool, "valid": action.valid})
                )
        contributed = bool(turn.edits)
        for n, _ in enumerate(turn.subagents, 1):
            out.append(
                AgentEvent(
                    "agent.subagent_finished", {"subagent_id": f"sa{n}", "contributed": contributed}
                )
            )
        if turn.clarifying:
            out.append(AgentEvent("agent.clarifying_question", {}))
        out.append(
            AgentEvent(
                "interaction.completed", {"latency_ms": latency_ms, "output_tokens": output_tokens}
            )
        )
        return out

    def _block(self, info: str, body: str, edit_id: str) -> Edit | ToolCall | None:
        if info == TOOL_FENCE or (info in ("", "json") and _TOOL_START.match(body)):
            return self._call(body.strip())
        if not body.strip():
            return None  # an empty block proposes nothing
        if info in DIFF_FENCES:
            added, removed = _diff_counts(body)
        else:
            added, removed = sum(1 for line in body.splitlines() if line.strip()), 0
        return Edit(edit_id, info, body, added, removed)

    def _bare_call(self, lines: list[str], start: int) -> tuple[ToolCall, int, str]:
        """The call that starts at ``lines[start]``, the index of the line after it, and what
        follows it on its last line (prose)."""
        rest = "".join(lines[start:])
        offset = rest.index("{")
        try:
            _, end = json.JSONDecoder().raw_decode(rest, offset)
        except json.JSONDecodeError:
            return self._call(lines[start].strip()), start + 1, ""
        consumed = rest.count("\n", 0, end)
        last_line_start = rest.rfind("\n", 0, end) + 1
        tail = lines[start + consumed][end - last_line_start :]
        return self._call(rest[offset:end]), start + consumed + 1, tail

    def _call(self, source: str) -> ToolCall:
        known = {tool.name: tool for tool in self.tools}
        try:
            call = json.loads(source)
        except json.JSONDecodeError:
            call = None
        if not _is_call_shape(call):
            named = _TOOL_NAME.search(source)
            name = named["name"] if named and named["name"] in known else MALFORMED_TOOL
            return ToolCall(name, CallProblem.malformed)
        spec = known.get(call["tool"])
        if spec is None:
            return ToolCall(UNKNOWN_TOOL, CallProblem.unknown_tool)
        args = call.get("args", {})
        if any(name not in args for name in spec.required_args):
            return ToolCall(spec.name, CallProblem.missing_args, args)
        return ToolCall(spec.name, None, args)


def _fenced_body(lines: list[str], start: int, fence: str) -> tuple[str, int]:
    """The body of a block opened by ``fence`` just before ``lines[start]``, and the index of
    the line after its closing fence (or the end: an unclosed block runs to the end)."""
    closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for j in range(start, len(lines)):
        if closing.match(lines[j]):
            return "".join(lines[start:j]), j + 1
    return "".join(lines[start:]), len(lines)


def _is_call_shape(call: object) -> bool:
    return (
        isinstance(call, dict)
        and isinstance(call.get("tool"), str)
        and call.keys() <= {"tool", "args"}
        and isinstance(call.get("args", {}), dict)
    )


def _diff_counts(body: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff's body.

    >>> _diff_counts("--- a/x.py\\n+++ b/x.py\\n@@ -1 +1,2 @@\\n-a\\n+b\\n+c\\n")
    (2, 1)
    """
    added = removed = 0
    for line in body.splitlines():
        if line.startswith(("+++", "---")):
            continue
        added += line.startswith("+")
        removed += line.startswith("-")
    return added, removed
