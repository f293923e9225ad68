"""The orgs world's users and its closing A/B's convention rate.

The conventions conflict: a terse organisation's users reject an edit written after prose, an
explained one's reject bare code, whatever the code does; an organisation with no convention
judges by the code world's rule alone. The convention rate's interval counts a user's two asks as
one cluster: with users whose habits differ, as the closing A/B's do, an interval over answers
would cover the truth less often than it says."""

from __future__ import annotations

import random

import pytest

from agent.harness import Harness
from agent.sandbox import grade
from agent.tasks import get_task
from rtrl.worlds.code_world import Outcome
from rtrl.worlds.http_users import Answer
from rtrl.worlds.org_world import ORGS, OrgTally, convention_move, convention_rule, follows
from rtrl.worlds.text_users import Reaction, by_rule

TASK = get_task("square")
PASSING = "```python\ndef square(x):\n    return x * x\n```"
EXPLAINED = "Here is the function:\n" + PASSING
HARNESS = Harness()


def _react(convention, text: str) -> Reaction:
    turn = HARNESS.read(text)
    return convention_rule(convention, text)(turn, grade(turn.code(), TASK))


def test_the_conventions_conflict_on_the_same_passing_code() -> None:
    kept = Reaction(True, False, False, 1.0)
    rejected = Reaction(False, False, True, None)
    assert (_react("terse", PASSING), _react("terse", EXPLAINED)) == (kept, rejected)
    assert (_react("explained", PASSING), _react("explained", EXPLAINED)) == (rejected, kept)
    # with no convention, the code world's rule, whatever the form
    assert _react(None, PASSING) == _react(None, EXPLAINED) == kept
    turn = HARNESS.read(EXPLAINED)
    assert _react(None, EXPLAINED) == by_rule(turn, grade(turn.code(), TASK))


def test_an_answer_without_code_is_no_edit_for_any_convention() -> None:
    prose = "Here is how you would square a number: multiply it by itself."
    for convention in ("terse", "explained", None):
        assert _react(convention, prose) == Reaction(None, False, True, None)


def test_failing_code_in_the_asked_form_is_reverted_not_rejected() -> None:
    failing = "```python\ndef square(x):\n    return x + x\n```"
    assert _react("terse", failing) == Reaction(True, True, True, None)


def test_the_world_has_unequal_organisations_and_one_without_a_convention() -> None:
    assert [o.users(240) for o in ORGS] == [240, 120, 60]
    assert {o.convention for o in ORGS} == {"terse", "explained", None}
    assert len({o.name for o in ORGS}) == len(ORGS)


def _outcome(user: str, text: str, arm: str, turns: dict) -> Outcome:
    turn = turns[text]
    answer = Answer(f"i_{user}_{random.random()}", (), "c", ("final-ab-x", arm), text=text)
    return Outcome(answer, TASK, turn, None, Reaction(None, False, True, None), user)


def _arm(rng: random.Random, users: int, arm: str, turns: dict) -> list[Outcome]:
    """``users`` users of two asks each, each with a habit of their own (a user writes prose
    first with a chance drawn from Beta(0.5, 0.5): half the spread is between users)."""
    out = []
    for u in range(users):
        habit = rng.betavariate(0.5, 0.5)
        for _ in range(2):
            text = EXPLAINED if rng.random() < habit else PASSING
            out.append(_outcome(f"{arm}{u}", text, arm, turns))
    return out


def test_the_convention_rate_interval_holds_its_coverage_with_users_of_their_own_habits() -> None:
    """Both arms drawn alike (no effect): the 95 % interval of the difference must cover 0 in
    about 95 % of 1,000 A/Bs of 12 users an arm (94.5 % here). Read over answers instead of
    users (each answer its own cluster), it covered 0 in 86.7 %, and this test failed."""
    rng = random.Random(7)
    turns = {t: HARNESS.read(t) for t in (PASSING, EXPLAINED)}
    covered = 0
    reps = 1000
    for _ in range(reps):
        control, treatment = _arm(rng, 12, "control", turns), _arm(rng, 12, "treatment", turns)
        move = convention_move(control, treatment, "terse")
        assert move is not None  # every answer has code: each arm has edits
        covered += move.low <= 0 <= move.high
    assert covered / reps >= 0.93, covered / reps


def test_a_tally_counts_the_convention_over_edits_and_the_rest_over_answers() -> None:
    turns = {t: HARNESS.read(t) for t in (PASSING, EXPLAINED, "no code")}
    outcomes = [_outcome("u", t, "control", turns) for t in (PASSING, EXPLAINED, "no code")]
    tally = OrgTally.of(outcomes, "explained")
    assert (tally.answers, tally.edits, tally.followed) == (3, 2, 1)
    assert tally.share("followed") == 0.5 and tally.share("dissatisfied") == 1.0
    assert follows(None, EXPLAINED) is None


@pytest.mark.parametrize("convention", ["terse", "explained"])
def test_a_real_move_is_found(convention) -> None:
    """Control writes prose first half the time, treatment always in the asked form: the
    interval lies above 0."""
    rng = random.Random(3)
    turns = {t: HARNESS.read(t) for t in (PASSING, EXPLAINED)}
    asked = PASSING if convention == "terse" else EXPLAINED
    control = _arm(rng, 30, "control", turns)
    treatment = [_outcome(f"t{u}", asked, "treatment", turns) for u in range(30) for _ in (0, 1)]
    move = convention_move(control, treatment, convention)
    assert move is not None and move.treatment == 1.0 and move.low > 0


def test_an_arm_without_an_edit_has_no_rate() -> None:
    """Undefined, not 0, and no crash (the closing A/B of a model that writes no code)."""
    turns = {t: HARNESS.read(t) for t in (PASSING, "no code")}
    with_code = [_outcome("u1", PASSING, "treatment", turns)]
    assert convention_move([_outcome("u2", "no code", "control", turns)], with_code,
                           "terse") is None  # fmt: skip
