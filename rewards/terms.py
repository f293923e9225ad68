"""The five terms of reward spec v1, each a small pure function of counts the record also keeps.

Terms are returned unrounded; only their sum is rounded (see :func:`total`). Every term is
normalised so that it is never ``-0.0`` (which would print and hash differently from ``0.0``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from rewards.config import RewardConfig

ACCEPTED = "accepted"
REJECTED = "rejected"


def edit_score(
    decision: str | None, reverted: bool, retained_fraction: float | None, config: RewardConfig
) -> float:
    """score(e) = accept + retain + revert of one proposed edit.

    ``decision`` is the edit's last decision (``"accepted"``, ``"rejected"`` or None);
    ``reverted`` whether an ``edit.reverted`` follows that acceptance; ``retained_fraction`` that
    of the edit's last retention measurement (None if none).

    >>> c = RewardConfig()
    >>> edit_score("accepted", False, 0.5, c), edit_score("accepted", True, 0.9, c)
    (1.5, 0.0)
    >>> edit_score("rejected", False, 1.0, c), edit_score(None, False, 1.0, c)
    (-0.5, 0.0)
    """
    if decision == ACCEPTED:
        if reverted:
            return config.accept + config.revert + 0.0
        return config.accept + config.retain_weight * (retained_fraction or 0.0) + 0.0
    if decision == REJECTED:
        return config.reject + 0.0
    return 0.0


def r_edit(scores: Iterable[float]) -> float:
    """Mean of the edits' scores, 0.0 without edits (exactly summed, so order never matters).

    >>> r_edit([1.5, -0.5]), r_edit([])
    (0.5, 0.0)
    """
    scores = list(scores)
    if not scores:
        return 0.0
    return math.fsum(scores) / len(scores) + 0.0


def r_followup(dissatisfied: bool, config: RewardConfig) -> float:
    """The dissatisfaction penalty if any follow-up said so.

    >>> r_followup(True, RewardConfig()), r_followup(False, RewardConfig())
    (-1.0, 0.0)
    """
    return config.followup_dissatisfied + 0.0 if dissatisfied else 0.0


def r_tool(n_invalid_tool_calls: int, config: RewardConfig) -> float:
    """Penalty per invalid tool call, floored: invalid calls are never discarded.

    >>> r_tool(1, RewardConfig()), r_tool(9, RewardConfig()), r_tool(0, RewardConfig())
    (-0.5, -2.0, 0.0)
    """
    return max(config.invalid_tool_call * n_invalid_tool_calls, config.invalid_tool_floor) + 0.0


def r_clarify(n_clarifying: int, n_edits: int, config: RewardConfig) -> float:
    """Penalty per clarifying question, floored, only when no edit was proposed.

    >>> c = RewardConfig()
    >>> r_clarify(2, 0, c), r_clarify(7, 0, c), r_clarify(2, 1, c)
    (-0.5, -1.0, 0.0)
    """
    if n_edits:
        return 0.0
    return max(config.clarify * n_clarifying, config.clarify_floor) + 0.0


def r_latency(latency_ms: int | None, config: RewardConfig) -> float:
    """Latency penalty of the last completion, capped at one scale; 0.0 without a completion.

    >>> c = RewardConfig()
    >>> r_latency(5000, c), r_latency(60000, c), r_latency(None, c)
    (-0.05, -0.1, 0.0)
    """
    if latency_ms is None:
        return 0.0
    return config.latency * min(latency_ms / config.latency_scale_ms, 1.0) + 0.0


def total(terms: Iterable[float], config: RewardConfig) -> float:
    """The reward: the exact sum of the terms, rounded once (round-half-even on the binary value).

    >>> total([0.1, 0.2, -0.0000004], RewardConfig())
    0.3
    """
    return round(math.fsum(terms), config.reward_decimals) + 0.0
