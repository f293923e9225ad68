"""Every way a run of the agent world can end, as the events the world sends for it: what a
reward configuration is held to (``tests/rewards/test_rewards_agent_config.py``), and the
events file ``bench/agent_reward_outcomes.py`` writes for `rtrl backfill` to compare two over.

Only what the reward reads varies: what the run wrote (:data:`EDITS`), how many of its calls
were broken, and the user's wait. Each run is made by the world's own parts: its tools carried
out for real in a fresh repository (``agent.tool_agent.execute``), the answers the gateway
could not read as calls (``broken_calls``), the hidden cases' grade of the module after the run
(``agent.sandbox.grade``), and the user's rule and the events the plugin sends
(``rtrl.worlds.text_users.by_rule``, ``now_events``, ``later_events``). Only the envelope
(ids, times) is made here: the collector's part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.harness import Edit, ToolCall
from agent.sandbox import Grade, grade
from agent.tasks import Task
from agent.tool_agent import AgentRun, Step, broken_calls, execute
from agent.workspace import MODULE, Workspace
from rtrl.worlds.http_users import LOOK_AGAIN_S
from rtrl.worlds.text_users import by_rule, later_events, now_events

NO_EDIT = ("prose", "looked")
"""Runs without an edit: an answer in prose only; reads and test runs, nothing written."""
FAILED_EDIT = ("other_file", "does_not_run", "fails")
"""Runs whose edit the user does not keep: a write that leaves ``solution.py`` as it was
(rejected), a module that does not run (rejected), one that runs and fails a hidden case
(accepted, then reverted)."""
SOLVED = "solved"
EDITS = (*NO_EDIT, *FAILED_EDIT, SOLVED)
WAIT_MS = 80_000
"""A run's wait in the agent world on two cores (70-100 s: the shared server's queue)."""
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

_Action = Edit | ToolCall


@dataclass(frozen=True)
class Outcome:
    """How one run ended: what it wrote, its broken calls, and the user's wait."""

    edit: str  # one of EDITS
    broken: int  # invalid calls in the run
    latency_ms: int = WAIT_MS

    @property
    def name(self) -> str:
        """``fails-2broken``; the wait too when it is not :data:`WAIT_MS`."""
        wait = "" if self.latency_ms == WAIT_MS else f"@{self.latency_ms / 1000:g}s"
        return f"{self.edit}-{self.broken}broken{wait}"


def outcomes(max_broken: int, waits_ms: Sequence[int] = (WAIT_MS,)) -> list[Outcome]:
    """Every edit with 0..``max_broken`` broken calls, at each wait."""
    return [Outcome(edit, k, wait) for edit in EDITS for k in range(max_broken + 1)
            for wait in waits_ms]  # fmt: skip


def _written(edit: str, task: Task) -> dict[str, str] | None:
    """The ``write_file`` arguments of a run that ends in ``edit`` (None: it writes nothing)."""
    header = f"def {task.signature}"
    contents = {
        "other_file": ("notes.py", task.reference),
        "does_not_run": (MODULE, f"{header}\n    return\n"),  # no colon: a syntax error
        "fails": (MODULE, f"{header}:\n    return None\n"),
        SOLVED: (MODULE, task.reference),
    }
    if edit not in contents:
        return None
    path, content = contents[edit]
    return {"path": path, "content": content}


def carried_out(edit: str, task: Task) -> tuple[tuple[_Action, ...], Grade | None]:
    """The valid actions of a run that ends in ``edit``, carried out in a fresh repository,
    and the hidden cases' grade after it (None: ``solution.py`` unchanged, as the world)."""
    if edit not in EDITS:
        raise ValueError(f"unknown edit {edit!r}: one of {EDITS}")
    actions: list[_Action] = []
    with Workspace(task) as repo:
        if edit != "prose":
            for name, arguments in (("read_file", {"path": MODULE}), ("run_tests", {})):
                actions += execute(repo, name, json.dumps(arguments), 0)[0]
        written = _written(edit, task)
        if written is not None:
            actions += execute(repo, "write_file", json.dumps(written), 0)[0]
        graded = grade(repo.module(), task) if repo.module_changed() else None
    return tuple(actions), graded


def broken_actions(count: int, task: Task) -> list[tuple[_Action, ...]]:
    """``count`` broken calls, one answer each, cycling through every way the world breaks
    one: an answer the gateway could not read, an unknown tool, arguments that are not JSON,
    a missing argument, a path outside the repository."""
    with Workspace(task) as repo:
        kinds = (
            lambda: tuple(broken_calls('<tool_call>\n{"name": "run_tests", "x"}\n')),
            lambda: tuple(execute(repo, "deploy", "{}", 0)[0]),
            lambda: tuple(execute(repo, "read_file", "{not json", 0)[0]),
            lambda: tuple(execute(repo, "write_file", json.dumps({"path": MODULE}), 0)[0]),
            lambda: tuple(execute(repo, "read_file", json.dumps({"path": "../x"}), 0)[0]),
        )
        return [kinds[n % len(kinds)]() for n in range(count)]


def outcome_events(outcome: Outcome, task: Task, done: tuple[tuple[_Action, ...], Grade | None],
                   interaction_id: str, t0: datetime = T0) -> list[dict[str, Any]]:  # fmt: skip
    """The events the world sends for a run that ended in ``outcome`` (its valid actions and
    grade ``done`` from :func:`carried_out`), as the collector lands them: the broken answers
    first, then the valid calls, the verdicts at the run's end and the second look
    ``LOOK_AGAIN_S`` later. The outcome's name stands in the checkpoint id, so that a backfill's
    per-checkpoint table is a table per outcome."""
    actions, graded = done
    answers = [*broken_actions(outcome.broken, task), actions]
    steps = [Step(interaction_id, outcome.name, None, 0, 10, answer) for answer in answers]
    turn = AgentRun("u-agent", steps, "finish", outcome.latency_ms).turn
    reaction = by_rule(turn, graded)
    ended = t0 + timedelta(milliseconds=outcome.latency_ms)
    second_look = ended + timedelta(seconds=LOOK_AGAIN_S)
    timed = [(ended, e) for e in now_events(turn, reaction, outcome.latency_ms, 10 * len(steps))]
    timed += [(second_look, e) for e in later_events(turn, reaction, round(LOOK_AGAIN_S))]
    return [_landed(interaction_id, n, at if n else t0, event.type, event.payload, outcome.name)
            for n, (at, event) in enumerate(timed)]  # fmt: skip


def _landed(interaction_id: str, n: int, at: datetime, event_type: str,
            payload: dict[str, object], checkpoint_id: str) -> dict[str, Any]:  # fmt: skip
    stamp = (at + timedelta(microseconds=n)).isoformat(timespec="microseconds")
    stamp = stamp.replace("+00:00", "Z")
    return {"event_id": f"{interaction_id}-{n:03d}", "type": event_type, "schema_version": 1,
            "ts": stamp, "received_at": stamp, "interaction_id": interaction_id,
            "session_id": f"s-{interaction_id}", "user_id": "u-agent", "org_id": "org-agent",
            "checkpoint_id": checkpoint_id, "payload": dict(payload)}  # fmt: skip


def all_outcome_events(task: Task, chosen: Sequence[Outcome]) -> Iterator[list[dict[str, Any]]]:
    """Each outcome's events (one interaction each), grading each kind of edit once."""
    done = {edit: carried_out(edit, task) for edit in sorted({o.edit for o in chosen})}
    for n, outcome in enumerate(chosen):
        yield outcome_events(outcome, task, done[outcome.edit], f"i-{n:04d}")
