"""The orgs world of `rtrl run --world orgs`: organisations of unequal size whose users ask for
the same easy tasks and hold conventions that conflict, so that no one checkpoint suits them all.

The convention is whether an answer explains itself in prose before its code
(:func:`has_preamble`). SmolLM2-135M-Instruct writes a sentence before its code block in 49 % of
its answers with code on the easy tasks (55 of 112, 160 answers at the code world's sampling:
bench/RESULTS.md, "The orgs world"), inside the 20-80 % where a model can be taught either way.

- ``terse`` users want the code alone: they reject an edit that comes after prose, at once and
  dissatisfied, whatever the code does;
- ``explained`` users want a word of explanation first: they reject bare code the same way;
- users with no convention follow the code world's rule (``rtrl.worlds.text_users.by_rule``):
  the shared checkpoint suits them as well as it suits anyone.

An edit that meets the user's convention is then judged by the code world's rule (accepted when
it runs and defines the function, kept when it passes the hidden tests). So the reward of every
answer with code carries the convention: -1.5-ish for a rejected edit against -1 for a reverted
one and +2 for a kept one.

The organisations' users share user ids (each organisation's round draws ``u_code0000``, ...):
the platform must keep them apart by the organisation of the API key they came in with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent.harness import Turn
from agent.sandbox import Grade
from rtrl.worlds.code_world import Outcome, React
from rtrl.worlds.http_users import Answer
from rtrl.worlds.text_users import Reaction, by_rule
from stats.cluster_ratio import ClusterRatio, cluster_ratio, satterthwaite_df
from stats.student_t import t_quantile

Convention = Literal["terse", "explained"]
_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class OrgSpec:
    """An organisation of the world: its name (and API key's), its size as a share of the
    largest's users a round, and its users' convention (None: the code world's rule)."""

    name: str
    share: float
    convention: Convention | None

    def users(self, largest: int) -> int:
        """Its users a round when the largest organisation has ``largest``.

        >>> OrgSpec("b", 0.5, "terse").users(240), OrgSpec("c", 0.25, None).users(6)
        (120, 2)
        """
        return max(1, round(largest * self.share))


ORGS = (
    OrgSpec("acme", 1.0, "terse"),
    OrgSpec("globex", 0.5, "explained"),
    OrgSpec("initech", 0.25, None),
)
"""The world's organisations: one large, one of half its size, one of a quarter (240, 120, 60
users a round at the default size); the two conventions conflict, the third has none."""


def has_preamble(text: str) -> bool:
    """Whether ``text`` says something in prose before its first code fence (an answer with no
    fence has none: its code, if any, is not an edit the harness reads).

    >>> has_preamble("Here it is:\\n```python\\nx = 1\\n```"), has_preamble("```python\\nx = 1")
    (True, False)
    >>> has_preamble("  \\n```py\\nx\\n```"), has_preamble("no code at all")
    (False, False)
    """
    fence = _FENCE.search(text)
    return fence is not None and bool(_WORD.search(text[: fence.start()]))


def follows(convention: Convention | None, text: str) -> bool | None:
    """Whether an answer's form meets ``convention`` (None: there is none to meet).

    >>> follows("terse", "```python\\nx = 1\\n```"), follows("explained", "```python\\nx = 1")
    (True, False)
    >>> follows(None, "anything") is None
    True
    """
    if convention is None:
        return None
    return has_preamble(text) == (convention == "explained")


def convention_rule(convention: Convention | None, text: str) -> React:
    """How a user of ``convention`` reacts to the turn read from ``text``: an edit whose form
    breaks the convention is rejected at once with a dissatisfied follow-up; any other turn by
    the code world's rule."""

    def react(turn: Turn, graded: Grade | None) -> Reaction:
        if turn.edits and follows(convention, text) is False:
            return Reaction(False, False, True, None)
        return by_rule(turn, graded)

    return react


def reaction_rule(convention: Convention | None) -> Callable[[Answer], React]:
    """The per-answer rule ``rtrl.worlds.code_world.play_users`` takes for these users."""
    return lambda answer: convention_rule(convention, answer.text)


@dataclass(frozen=True)
class OrgTally:
    """What an organisation's users got in a round (or an arm): answers, those with an edit,
    those whose form met the convention (of those with an edit), passed, kept, dissatisfied."""

    answers: int
    edits: int
    followed: int
    passed: int
    kept: int
    dissatisfied: int

    @classmethod
    def of(cls, outcomes: Sequence[Outcome], convention: Convention | None) -> OrgTally:
        edits = [o for o in outcomes if o.turn.edits]
        return cls(
            len(outcomes),
            len(edits),
            sum(_meets(convention, o.answer) for o in edits),
            sum(o.passed for o in outcomes),
            sum(bool(o.reaction.accepted) and not o.reaction.reverted for o in outcomes),
            sum(o.reaction.dissatisfied for o in outcomes),
        )

    def share(self, part: str) -> float | None:
        """``followed`` over the edits, any other count over the answers; None when 0."""
        whole = self.edits if part == "followed" else self.answers
        return getattr(self, part) / whole if whole else None


def share_text(share: float | None) -> str:
    """A share for a table, "-" when there is none.

    >>> share_text(0.456), share_text(None)
    ('0.46', '-')
    """
    return "-" if share is None else f"{share:.2f}"


def _meets(convention: Convention | None, answer: Answer) -> bool:
    """The convention met; with none, the preamble written (reported, never required)."""
    met = follows(convention, answer.text)
    return has_preamble(answer.text) if met is None else met


@dataclass(frozen=True)
class Move:
    """A difference between two arms' shares with its 95 % interval (users as clusters)."""

    control: float
    treatment: float
    low: float
    high: float

    @property
    def difference(self) -> float:
        return self.treatment - self.control


def move_text(move: Move | None) -> str:
    """A closing A/B's convention line.

    >>> move_text(Move(0.5, 0.75, 0.1, 0.4))
    'convention met 0.500 -> 0.750, +0.250 [+0.100, +0.400]'
    >>> move_text(None)
    'convention met: no rate (an arm wrote no edit)'
    """
    if move is None:
        return "convention met: no rate (an arm wrote no edit)"
    return (f"convention met {move.control:.3f} -> {move.treatment:.3f}, {move.difference:+.3f} "
            f"[{move.low:+.3f}, {move.high:+.3f}]")  # fmt: skip


def per_user(outcomes: Sequence[Outcome], convention: Convention | None) -> ClusterRatio | None:
    """The share of edits meeting ``convention``, over each user's edits (a user's two asks of
    the closing A/B are one cluster); None when no answer held an edit."""
    met: dict[str, list[int]] = {}
    for o in outcomes:
        if o.turn.edits:
            counts = met.setdefault(o.user_id, [0, 0])
            counts[0] += _meets(convention, o.answer)
            counts[1] += 1
    if not met:
        return None
    return cluster_ratio([m for m, _ in met.values()], [n for _, n in met.values()])


def convention_move(control: Sequence[Outcome], treatment: Sequence[Outcome],
                    convention: Convention | None) -> Move | None:  # fmt: skip
    """The treatment arm's convention rate against the control's, with Welch's interval on the
    cluster-robust variances (Satterthwaite's degrees of freedom); None when an arm wrote no
    edit (a model that writes no code: the rate is undefined, not 0)."""
    first, second = per_user(control, convention), per_user(treatment, convention)
    if first is None or second is None:
        return None
    se = math.sqrt(first.variance + second.variance)
    df = satterthwaite_df(first, second)
    half = t_quantile(0.975, df) * se if math.isfinite(se) and df > 0 else math.inf
    difference = second.value - first.value
    return Move(first.value, second.value, difference - half, difference + half)
