"""The candidate evals' alarm on data with no signal: parent and candidate behave alike, and
the one-sided test at alpha 0.05 fires about 5 % of the time (less once the thresholds on the
size of the move apply)."""

from __future__ import annotations

import random

from release.candidate_evals import holm, one_sided_test, paired_test


def test_the_behaviour_alarm_fires_at_about_its_level_when_nothing_changed():
    rng = random.Random(11)
    trials, n, rate = 1000, 304, 0.14  # 76 prompts x 4 samples, the simulator's invalid rate
    significant = alarms = 0
    for _ in range(trials):
        parent = [rng.random() < rate for _ in range(n)]
        candidate = [rng.random() < rate for _ in range(n)]
        test = one_sided_test("invalid_tool_call_rate", parent, candidate, 0.05, 0.0, 0.0)
        significant += test.p_value < 0.05
        alarm = one_sided_test("invalid_tool_call_rate", parent, candidate, 0.05, 0.5, 0.02).alarm
        # An alarm is a significant move that is also big: +0.02 absolute and +50 % relative.
        moved = test.candidate - test.parent
        big = moved >= 0.02 and (test.parent == 0 or moved / test.parent >= 0.5)
        assert alarm == (test.p_value < 0.05 and big), (test, alarm)
        alarms += alarm
    assert 0.02 <= significant / trials <= 0.08  # nominal 0.05
    # The thresholds on the size of the move silence part of the significant noise.
    assert 0 < alarms < significant


def _pairs(rng: random.Random, rates: list[float], samples: int, coupled: float,
           shift: float) -> tuple[list[bool], list[bool]]:  # fmt: skip
    """Generations of a parent and a candidate on the same prompts and random numbers: with
    probability ``coupled`` a pair comes out alike (the candidate is a small step from its
    parent), else the candidate draws afresh at its own rate (the parent's + ``shift``)."""
    parent, candidate = [], []
    for rate in rates:
        for _ in range(samples):
            p = rng.random() < rate
            c = p if rng.random() < coupled else rng.random() < rate + shift
            parent.append(p)
            candidate.append(c)
    return parent, candidate


def _paired_size(seed: int, prompts: int, coupled: float) -> float:
    rng = random.Random(seed)
    trials, significant = 2000, 0
    for _ in range(trials):
        rates = [rng.choice((0.02, 0.1, 0.3, 0.5)) for _ in range(prompts)]
        parent, candidate = _pairs(rng, rates, 4, coupled, 0.0)
        test = paired_test("invalid_tool_call_rate", parent, candidate, 0.05, 0, 0)
        significant += test.p_value < 0.05
    return significant / trials


def test_the_paired_alarm_holds_its_level_on_prompts_of_different_rates():
    """No change: each prompt's rate is the same for both, the rates differ between prompts
    (0.02 to 0.5). The exact McNemar test stays under 5 %: far under with few pairs that
    differ (a tail of 4 discordant pairs cannot go under 1/16), near it with many."""
    few, many = _paired_size(5, 16, 0.8), _paired_size(7, 64, 0.3)
    assert few <= 0.05, few
    assert 0.02 <= many <= 0.055, many


def test_pairing_sees_a_move_that_two_independent_rates_miss():
    """The same 64 pairs, most of them alike, and a candidate worse where it differs from its
    parent: the paired test finds the move far more often than the unpaired one (which is
    what lets the evals run on a CPU with few generations)."""
    rng = random.Random(6)
    trials, paired, unpaired = 500, 0, 0
    for _ in range(trials):
        rates = [rng.choice((0.05, 0.1, 0.2)) for _ in range(16)]
        parent, candidate = _pairs(rng, rates, 4, 0.85, 0.6)
        paired += paired_test("invalid_tool_call_rate", parent, candidate, 0.05, 0, 0).alarm
        unpaired += one_sided_test("invalid_tool_call_rate", parent, candidate, 0.05, 0, 0).alarm
    assert paired / trials >= 0.6, (paired, unpaired)
    assert paired >= 1.5 * unpaired, (paired, unpaired)


def _family_false_alarms(correct: bool, trials: int = 400) -> float:
    """Share of rounds with any alarm among five behaviours that did not change (64 prompts x 4
    pairs each, most pairs differing), the tests taken as the round takes them."""
    rng = random.Random(23)
    metrics = ("invalid_tool_call_rate", "clarifying_rate", "subagent_rate", "edit_rate",
               "unused_subagent_share")  # fmt: skip
    any_alarm = 0
    for _ in range(trials):
        tests = []
        for metric in metrics:
            rates = [rng.choice((0.1, 0.3, 0.5)) for _ in range(64)]
            parent, candidate = _pairs(rng, rates, 4, 0.3, 0.0)
            tests.append(paired_test(metric, parent, candidate, 0.05, 0, 0))
        any_alarm += any(t.alarm for t in (holm(tests, 0.05) if correct else tests))
    return any_alarm / trials


def test_holm_keeps_the_rounds_false_alarms_at_alpha_across_the_behaviours():
    """Five behaviours, none changed: with Holm's correction a round raises any alarm at most
    at alpha (+3 Monte-Carlo standard errors); without it (each test at alpha, as before: the
    break) about one round in five did."""
    corrected, each_at_alpha = _family_false_alarms(True), _family_false_alarms(False)
    se = (0.05 * 0.95 / 400) ** 0.5
    assert corrected <= 0.05 + 3 * se, corrected
    assert each_at_alpha > 0.05 + 3 * se, each_at_alpha
