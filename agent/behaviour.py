"""The behaviour flags the monitors watch, read from a response by the harness.

``rewards.monitors`` computes each rate over a checkpoint's interactions from their telemetry;
the candidate evals need the same flags from generations that no user saw. Both come from the
one reading of text (``Harness``), so a rate measured before serving means what the live
monitor will measure after. Each flag is "this interaction has at least one ...", as the
monitors count them.

``HarnessBehaviour`` is the reader ``release.candidate_evals.compare_behaviour`` takes.

>>> flags = text_behaviour('{"tool": "deploy"}')
>>> flags["invalid_tool_call_rate"], flags["edit_rate"], flags["clarifying_rate"]
(True, False, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agent.harness import Harness, Turn

BEHAVIOUR_METRICS = ("invalid_tool_call_rate", "edit_rate", "clarifying_rate", "subagent_rate")
"""The monitors' per-interaction rates (``rewards.monitors.METRICS``) that one response decides;
the unused sub-agents' share is a share of sub-agents, and the censored share depends on users."""


def behaviour_flags(turn: Turn) -> dict[str, bool]:
    """Whether the turn counts towards each of ``BEHAVIOUR_METRICS``."""
    return {
        "invalid_tool_call_rate": any(not call.valid for call in turn.tool_calls),
        "edit_rate": bool(turn.edits),
        "clarifying_rate": turn.clarifying,
        "subagent_rate": bool(turn.subagents),
    }


def text_behaviour(text: str, harness: Harness | None = None) -> dict[str, bool]:
    """``behaviour_flags`` of a response's text."""
    return behaviour_flags((harness or Harness()).read(text))


class HasText(Protocol):
    """A generation with its decoded text (``models.policy.Completion`` is one)."""

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class HarnessBehaviour:
    """A behaviour reader for ``compare_behaviour``: a completion's flags from its text.

    It reads ``Completion.text`` (decoded without special tokens and cut before a stop string,
    as served), never token ids: the harness acts on text.
    """

    harness: Harness = Harness()

    def __call__(self, completion: HasText) -> dict[str, bool]:
        return text_behaviour(completion.text, self.harness)
