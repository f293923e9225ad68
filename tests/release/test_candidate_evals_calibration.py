"""The candidate evals' alarm on data with no signal: parent and candidate behave alike, and
the one-sided test at alpha 0.05 fires about 5 % of the time (less once the thresholds on the
size of the move apply)."""

from __future__ import annotations

import random

from release.candidate_evals import one_sided_test


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
