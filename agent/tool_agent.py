"""A coding agent that works by tool calls, over any OpenAI-compatible chat endpoint.

The loop is the plain one product teams write against the official ``openai`` client: send the
task with the tools (``read_file(path)``, ``write_file(path, content)``, ``run_tests()``,
``finish()``), carry out each call the answer makes, for real, in the run's repository
(``agent.workspace``), send the results back as ``tool`` messages, and ask again, up to
``max_calls`` requests. Every request of a run carries the same ``X-Rtrl-User-Id`` and nothing
else that names the run, so that it is the gateway that joins them into one interaction (by its
calls' ids, or by an answer's text under that user); the interaction each answer names is kept
per step, so a test can hold the gateway to it.

Nothing the model does is dropped or repaired, because the reward must see it (reward spec v1,
``r_tool``). Every call is an action of the run, in order, as the harness's types (so the
harness's events say it: ``agent.tool_call {tool, valid}``, ``agent.edit_proposed``):

- a call the gateway returned in ``tool_calls`` is valid when it names a tool, gives its
  required arguments, and could be carried out (a path outside the repository, a missing file,
  cannot: ``refused``);
- an answer whose text holds ``<tool_call>`` is one the gateway could not read as calls: each
  ``<tool_call>`` in it is an invalid call, named as the harness names one (the tool, when the
  text names a known one, else ``unknown`` or ``malformed``), and the agent tells the model its
  call could not be read and asks again (so that call joins the run by its text);
- an answer its token budget cut (finish reason ``length``) while it wrote a call (under a
  constraint every answer is one, even one cut before its marker was whole) is an invalid call
  whose reason is ``length`` (``CallProblem.length``; the step keeps the finish reason too), and
  the run goes on: a cut call is what the model sampled, and dropping its run would be the
  discard reward spec v1 forbids;
- a ``write_file`` that changes the repository is an edit, with its lines added and removed.

An answer in prose (no call) is told once (``nudges``) to act by calling a tool, as agent loops
do with a model that drifts into chat; the next prose answer ends the run. A run also ends at
``finish``, when the budget is spent, or when the history outgrows the model's context (the
gateway's 400 ``context_length_exceeded``: a spliced prompt is never cut).

Small models rarely write a call from a tool list alone (SmolLM2-135M wrote none in 16 tries;
with one worked example, half of its answers tried the format), so the history starts, by
default, with one example run on a function no task asks for.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.harness import MALFORMED_TOOL, UNKNOWN_TOOL, CallProblem, Edit, ToolCall, ToolSpec, Turn
from agent.tasks import Task
from agent.tool_schemas import CALL_MAX_TOKENS, all_tools, constrained_tools, turn_choice
from agent.workspace import MODULE, Refused, Workspace

log = logging.getLogger(__name__)

USER_HEADER = "X-Rtrl-User-Id"
MARKER = "<tool_call>"  # where a call the gateway could not read starts in the answer's text
FINISH = "finish"
TOOLS = (
    ToolSpec("read_file", ("path",)),
    ToolSpec("write_file", ("path", "content")),
    ToolSpec("run_tests"),
    ToolSpec(FINISH),
)
SYSTEM = "You are a coding agent in a small repository. You act only by calling tools."
NOT_READ = "Your tool call could not be read. Call one tool, with its arguments as JSON."
NUDGE = "Do not answer in prose: act by calling one of the tools."
_NAME = re.compile(r'"name"\s*:\s*"(?P<name>[^"\\]{1,128})"')


def tool_definitions(constrained: bool = False) -> list[dict[str, Any]]:
    """The tools as OpenAI function tools (``agent.tool_schemas``): closed schemas, every
    argument required; a constrained run is offered ``write_file``, ``run_tests`` and
    ``finish`` only."""
    return constrained_tools() if constrained else all_tools()


def _example_call(n: int, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": f"example_{n}", "type": "function", "function": function}


EXAMPLE: tuple[dict[str, Any], ...] = (
    {"role": "user", "content": f"Implement `triple(x)` in {MODULE} with write_file: return "
     "three times the number `x`."},
    {"role": "assistant", "content": None, "tool_calls": [_example_call(1, "write_file", {
        "path": MODULE, "content": "def triple(x):\n    return 3 * x\n"})]},
    {"role": "tool", "tool_call_id": "example_1", "content": f"wrote {MODULE} (+1 -2 lines)"},
    {"role": "assistant", "content": None, "tool_calls": [_example_call(2, "run_tests", {})]},
    {"role": "tool", "tool_call_id": "example_2", "content": "2 of 2 tests passed"},
    {"role": "assistant", "content": None, "tool_calls": [_example_call(3, FINISH, {})]},
    {"role": "tool", "tool_call_id": "example_3", "content": "done"},
)  # fmt: skip
"""One worked run, on a function that no task asks for (``triple``)."""


def task_message(task: Task) -> str:
    """What the user asks: the task's prompt, pointed at the repository's module."""
    what = task.prompt.partition(": ")[2] or task.prompt
    return f"Implement `{task.signature}` in {MODULE} with write_file: {what}"


@dataclass(frozen=True)
class AgentSettings:
    max_calls: int = 4  # requests per run
    max_tokens: int = CALL_MAX_TOKENS  # per answer: an easy task's write_file call takes <= 59
    temperature: float = 0.7
    top_p: float = 1.0
    example: bool = True  # start the history with EXAMPLE
    nudges: int = 1  # answers in prose the agent answers with NUDGE before it ends the run
    constrained: bool = False
    """Valid actions by construction (``agent.tool_schemas.turn_choice``): the first request
    names ``write_file``, the later ones require one call of ``write_file``, ``run_tests`` or
    ``finish``, and a write's result shows the visible tests' report."""


@dataclass(frozen=True)
class Step:
    """One request of a run: what the gateway said of it, and what the answer did."""

    interaction_id: str  # the answer's X-Rtrl-Interaction-Id
    checkpoint_id: str
    experiment: tuple[str, str] | None  # (name, arm)
    latency_ms: int
    output_tokens: int
    actions: tuple[Edit | ToolCall, ...]
    finish_reason: str = "stop"  # the answer's: ``length`` when its token budget cut it


@dataclass
class AgentRun:
    """One run of the agent on one task: its requests in order and how it ended (``finish``,
    ``answered``, ``budget``, ``context``, or ``error``: a request the serving side failed;
    a run whose first request failed has no steps, and so no interaction)."""

    user_id: str
    steps: list[Step] = field(default_factory=list)
    ended: str = "budget"
    latency_ms: int = 0  # the user's wait: the run's first request to its end, tools included

    @property
    def interaction_id(self) -> str:
        return self.steps[0].interaction_id

    @property
    def joined(self) -> bool:
        """Whether the gateway put every request of the run in one interaction."""
        return len({s.interaction_id for s in self.steps}) == 1

    @property
    def turn(self) -> Turn:
        """The run as the harness's turn: every action in order (no question: it acted)."""
        return Turn(tuple(a for s in self.steps for a in s.actions), asked=False)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.steps)


def broken_calls(text: str, tools: Sequence[ToolSpec] = TOOLS,
                 cut: bool = False) -> tuple[ToolCall, ...]:  # fmt: skip
    """The invalid calls in an answer's text: one per ``<tool_call>``, named by the tool it
    names when that is a known one. ``cut``: the answer was a call that its token budget cut
    (finish reason ``length``), so its last call is invalid for that reason (``length``), and
    a cut answer without the whole marker (a budget shorter than the marker) is still one call.

    >>> [c.tool for c in broken_calls('<tool_call>\\n{"name": "run_tests", "x"}\\n<tool_call>')]
    ['run_tests', 'malformed']
    >>> broken_calls('<tool_call>{"name": "is_even"}</tool_call>')[0].problem.value
    'unknown_tool'
    >>> [(c.tool, c.problem.value) for c in broken_calls('<tool_call>{"name": "finish"', cut=True)]
    [('finish', 'length')]
    >>> [(c.tool, c.problem.value) for c in broken_calls('<tool', cut=True)]
    [('malformed', 'length')]
    """
    known = {t.name for t in tools}
    pieces = text.split(MARKER)[1:] or ([text] if cut else [])
    out = []
    for piece in pieces:
        named = _NAME.search(piece)
        if named is None:
            out.append(ToolCall(MALFORMED_TOOL, CallProblem.malformed))
        elif named["name"] in known:
            out.append(ToolCall(named["name"], CallProblem.malformed))
        else:
            out.append(ToolCall(UNKNOWN_TOOL, CallProblem.unknown_tool))
    if cut and out:
        out[-1] = ToolCall(out[-1].tool, CallProblem.length)
    return tuple(out)


def execute(workspace: Workspace, name: str, arguments: str | None, edits_before: int,
            show_tests: bool = False) -> tuple[list[Edit | ToolCall], str]:  # fmt: skip
    """Carry out one call the gateway returned: its actions (the call, then the edit it made)
    and the result the model is sent. ``edits_before``: the run's edits so far (for ids);
    ``show_tests``: a write's result goes on with the visible tests' report."""
    spec = next((t for t in TOOLS if t.name == name), None)
    if spec is None:
        return [ToolCall(UNKNOWN_TOOL, CallProblem.unknown_tool)], f"no tool named {name!r}"
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return [ToolCall(name, CallProblem.malformed)], "the arguments are not a JSON object"
    missing = [a for a in spec.required_args if a not in args]
    if missing:
        return [ToolCall(name, CallProblem.missing_args)], f"missing: {', '.join(missing)}"
    try:
        if name == "read_file":
            return [ToolCall(name, None)], workspace.read(args["path"])
        if name == "write_file":
            change = workspace.write(args["path"], args["content"])
            if change is None:
                return [ToolCall(name, None)], f"{args['path']} already holds that text"
            edit = Edit(f"e{edits_before + 1}", "python" if change.path.endswith(".py") else "",
                        args["content"], change.lines_added, change.lines_removed)  # fmt: skip
            done = f"wrote {change.path} (+{change.lines_added} -{change.lines_removed} lines)"
            if show_tests:
                done += "\n" + workspace.run_tests()
            return [ToolCall(name, None), edit], done
        if name == "run_tests":
            return [ToolCall(name, None)], workspace.run_tests()
        return [ToolCall(name, None)], "done"
    except Refused as exc:
        return [ToolCall(name, CallProblem.refused)], str(exc)


def run_agent(
    client: Any, workspace: Workspace, user_id: str,
    settings: AgentSettings = AgentSettings(), model: str = "default",
) -> AgentRun:  # fmt: skip
    """One run on ``workspace``'s task through ``client`` (an ``openai.OpenAI``)."""
    import openai

    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    if settings.example:
        messages += [dict(m) for m in EXAMPLE]
    messages.append({"role": "user", "content": task_message(workspace.task)})
    run, started, edits, nudged = AgentRun(user_id), time.perf_counter(), 0, 0
    for request in range(settings.max_calls):
        sent = time.perf_counter()
        choice = turn_choice(request) if settings.constrained else openai.NOT_GIVEN
        try:
            raw = client.chat.completions.with_raw_response.create(
                model=model, messages=messages, tools=tool_definitions(settings.constrained),
                tool_choice=choice,
                parallel_tool_calls=False, max_tokens=settings.max_tokens,
                temperature=settings.temperature, top_p=settings.top_p,
                extra_headers={USER_HEADER: user_id},
            )  # fmt: skip
        except openai.BadRequestError as exc:
            if run.steps and _over_context(exc):
                run.ended = "context"
                break
            raise
        except (openai.InternalServerError, openai.APIConnectionError) as exc:
            # the serving side failed (a 5xx, a lost connection, a timeout): the run ends there,
            # as the user would see it, with what it did so far; never a retry, which would be
            # a second answer in the run if the first was answered after all
            log.warning("an agent run for %s ended on a failed request: %s", user_id, exc)
            run.ended = "error"
            break
        latency_ms = round((time.perf_counter() - sent) * 1000)
        completion = raw.parse()
        message = completion.choices[0].message
        actions: list[Edit | ToolCall] = []
        nudging = False
        calls = list(message.tool_calls or ())
        text = message.content or ""
        finish_reason = completion.choices[0].finish_reason or ""
        # a call the budget cut: under a constraint every answer is a call, even one cut before
        # its marker was whole; it is an invalid call, never dropped (reward spec v1)
        cut = finish_reason == "length" and not calls and (settings.constrained or MARKER in text)
        if calls:
            messages.append({"role": "assistant", "content": message.content,
                             "tool_calls": [_as_dict(c) for c in calls]})  # fmt: skip
            for call in calls:
                function = getattr(call, "function", None)
                done, result = execute(workspace, getattr(function, "name", ""),
                                       getattr(function, "arguments", None), edits,
                                       settings.constrained)  # fmt: skip
                edits += sum(isinstance(a, Edit) for a in done)
                actions += done
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        elif MARKER in text or cut:
            actions += broken_calls(text, cut=cut)
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": NOT_READ}]  # fmt: skip
        elif nudged < settings.nudges:
            nudged, nudging = nudged + 1, True
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": NUDGE}]  # fmt: skip
        name, _, arm = (raw.headers.get("x-rtrl-experiment") or "").partition(":")
        usage = completion.usage
        run.steps.append(Step(
            raw.headers["x-rtrl-interaction-id"], raw.headers.get("x-rtrl-checkpoint-id", ""),
            (name, arm) if arm else None, latency_ms,
            usage.completion_tokens if usage else 0, tuple(actions), finish_reason,
        ))  # fmt: skip
        if any(isinstance(a, ToolCall) and a.valid and a.tool == FINISH for a in actions):
            run.ended = "finish"
            break
        if not actions and not nudging:
            run.ended = "answered"
            break
    run.latency_ms = round((time.perf_counter() - started) * 1000)
    return run


def _over_context(exc: Exception) -> bool:
    """The gateway's refusal of a history over the model's context: its own code, or the words
    of an engine's server that refused a prompt it rendered whole (llama-server's)."""
    return getattr(exc, "code", None) == "context_length_exceeded" or "context size" in str(exc)


def _as_dict(call: Any) -> dict[str, Any]:
    """A returned call as the history sends it back: its id, name and arguments as given."""
    function = getattr(call, "function", None)
    return {"id": call.id, "type": "function",
            "function": {"name": getattr(function, "name", ""),
                         "arguments": getattr(function, "arguments", "") or "{}"}}  # fmt: skip
