"""Simulated users of a coding agent that read its real text: the task world of `rtrl simulate`.

Each user asks for one of the shipped tasks (``agent.tasks``); the agent harness turns
the answer into the agent's actions; the edit's code runs against the task's hidden tests in the
sandbox. The user accepts an edit that passes and rejects one that fails (each verdict flipped
with the user's own noise), reverts some accepted edits later, sends a dissatisfied follow-up
after a failed or missing edit, and reports how much of a kept edit is still there. Each user has
hidden preferences the trainer never sees (how noisy, how quick to revert, how patient, and how
long an edit they put up with).

The code world's users (`rtrl run --world code`) follow a stated rule instead of a hidden taste
(:func:`by_rule`): they accept an edit whose code runs and defines the function they asked for,
keep it when it passes the task's hidden tests and revert it when it does not, and follow up
dissatisfied after a rejected, reverted or missing edit.

Pure: a user's reaction to a graded turn, and the events an editor plugin would send for it, at
once (:func:`now_events`) and on the user's second look at the edit (:func:`later_events`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from agent.harness import AgentEvent, Harness, Turn
from agent.sandbox import Grade

RETENTION_AFTER_S = 600


@dataclass(frozen=True)
class HiddenTaste:
    noise: float  # chance that a verdict on an edit is flipped
    revert: float  # chance that an accepted edit is reverted later
    impatience: float  # chance of a dissatisfied follow-up after a failed or missing edit
    max_lines: int  # a passing edit longer than this is rejected half of the time

    @classmethod
    def draw(cls, rng: random.Random) -> HiddenTaste:
        return cls(
            noise=rng.uniform(0.02, 0.15),
            revert=rng.uniform(0.0, 0.2),
            impatience=rng.uniform(0.3, 0.9),
            max_lines=rng.choice((8, 15, 40)),
        )


@dataclass(frozen=True)
class Reaction:
    accepted: bool | None  # None: no edit to judge
    reverted: bool
    dissatisfied: bool
    retained_fraction: float | None  # of a kept edit, measured later


def react(turn: Turn, passed: bool, taste: HiddenTaste, rng: random.Random) -> Reaction:
    """What the user does with a turn whose code ``passed`` the task's hidden tests or not.

    >>> turn = Harness().read("```python\\ndef f():\\n    return 1\\n```")
    >>> react(turn, True, HiddenTaste(0.0, 0.0, 1.0, 40), random.Random(0)).accepted
    True
    >>> react(Harness().read("What should it return?"), False,
    ...       HiddenTaste(0.0, 0.0, 1.0, 40), random.Random(0)).dissatisfied
    True
    """
    if not turn.edits:
        return Reaction(None, False, rng.random() < taste.impatience, None)
    good = passed
    if good and sum(e.lines_added for e in turn.edits) > taste.max_lines:
        good = rng.random() < 0.5
    accepted = good != (rng.random() < taste.noise)
    reverted = accepted and (not passed or rng.random() < taste.revert)
    failed = not accepted or reverted
    dissatisfied = failed and rng.random() < taste.impatience
    retained = None if not accepted or reverted else rng.uniform(0.6, 1.0)
    return Reaction(accepted, reverted, dissatisfied, retained)


def by_rule(turn: Turn, graded: Grade | None) -> Reaction:
    """The code world's stated rule, for a turn whose code got the sandbox's ``graded`` (None:
    the turn holds no Python code). Accept an edit whose code runs and defines the function
    asked for (the sandbox could call it on every hidden case); keep it whole when it passes
    every case, else revert it; follow up dissatisfied after a rejected, reverted or missing
    edit. The same code always gets the same reaction.

    >>> from agent.sandbox import Failure
    >>> turn = Harness().read("```python\\ndef f():\\n    return 1\\n```")
    >>> ran = Grade(3, 1, None, "", (), False)
    >>> by_rule(turn, ran)
    Reaction(accepted=True, reverted=True, dissatisfied=True, retained_fraction=None)
    >>> by_rule(turn, Grade(3, 3, Failure.missing_function, "f", (), False)).accepted
    False
    """
    if not turn.edits:
        return Reaction(None, False, True, None)
    accepted = graded is not None and graded.failure is None
    kept = accepted and graded is not None and graded.passed
    return Reaction(accepted, accepted and not kept, not kept, 1.0 if kept else None)


def now_events(turn: Turn, reaction: Reaction, latency_ms: int,
               output_tokens: int) -> list[AgentEvent]:  # fmt: skip
    """What the editor plugin reports at once: started, the agent's actions (the harness), the
    user's verdicts, and the follow-up of a user who did not accept the edit."""
    events = [AgentEvent("interaction.started", {"mode": "agent"})]
    events += Harness().events(turn, latency_ms=latency_ms, output_tokens=output_tokens)
    if reaction.accepted is not None:
        verdict = "edit.accepted" if reaction.accepted else "edit.rejected"
        events += [AgentEvent(verdict, {"edit_id": edit.edit_id}) for edit in turn.edits]
    if not reaction.accepted and (reaction.dissatisfied or reaction.accepted is not None):
        events.append(AgentEvent("followup.sent", {"dissatisfied": reaction.dissatisfied}))
    return events


def later_events(turn: Turn, reaction: Reaction,
                 after_s: int = RETENTION_AFTER_S) -> list[AgentEvent]:  # fmt: skip
    """What the plugin reports on the user's second look, ``after_s`` later, at an accepted
    edit: reverted, or how much of it is still there; then the user's follow-up."""
    if not reaction.accepted:
        return []
    events = []
    for edit in turn.edits:
        if reaction.reverted:
            events.append(AgentEvent("edit.reverted", {"edit_id": edit.edit_id}))
        elif reaction.retained_fraction is not None:
            events.append(AgentEvent("edit.retention", {
                "edit_id": edit.edit_id, "retained_fraction": reaction.retained_fraction,
                "after_s": after_s}))  # fmt: skip
    return [*events, AgentEvent("followup.sent", {"dissatisfied": reaction.dissatisfied})]


def plugin_events(turn: Turn, reaction: Reaction, latency_ms: int,
                  output_tokens: int) -> list[AgentEvent]:  # fmt: skip
    """The interaction as the editor plugin reports it: started, the agent's actions (the
    harness), then the user's verdicts, later measurements and follow-up."""
    return now_events(turn, reaction, latency_ms, output_tokens) + later_events(turn, reaction)
