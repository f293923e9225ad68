"""The canary's verdict on simulated live A/B data: a worse candidate is rolled back, one that
is not worse is rolled out, a skewed split and a live alarm roll back, and on data with no
signal the rollbacks happen at the stated error rate."""

from __future__ import annotations

import random

import pytest

from release.canary import CanaryConfig, UserSums, arm_of, judge, sample_ratio
from rewards.monitors import MonitorThresholds

THRESHOLDS = MonitorThresholds()


def users(rng: random.Random, n: int, accept: float, invalid: float) -> list[UserSums]:
    """``n`` users of 1 to 4 interactions; each interaction's reward is +1 when accepted, -1
    otherwise, and it makes an invalid tool call with probability ``invalid``."""
    out = []
    for _ in range(n):
        k = rng.randint(1, 4)
        accepted = sum(rng.random() < accept for _ in range(k))
        bad = sum(rng.random() < invalid for _ in range(k))
        out.append(UserSums(k, k, float(2 * accepted - k), {"invalid_tool_call_rate": bad}))
    return out


def split_users(rng: random.Random, total: int, percent: float) -> tuple[int, int]:
    canary = sum(rng.random() < percent / 100 for _ in range(total))
    return total - canary, canary


def verdict(rng: random.Random, config: CanaryConfig, total: int, canary_accept: float,
            canary_invalid: float = 0.1, look: int = 1):  # fmt: skip
    n_parent, n_canary = split_users(rng, total, config.percent)
    parent = arm_of(users(rng, n_parent, 0.5, 0.1))
    canary = arm_of(users(rng, n_canary, canary_accept, canary_invalid))
    return judge(parent, canary, config, THRESHOLDS, look)


CONFIG = CanaryConfig(percent=20, min_interactions=500)


def test_a_worse_canary_is_rolled_back():
    result = verdict(random.Random(1), CONFIG, 3000, canary_accept=0.40)
    assert result.verdict == "rollback"
    assert any(r.startswith("live reward worse") for r in result.reasons)
    reward = result.comparisons[0]
    assert reward.alarm and reward.ci_high < 0 < reward.parent - reward.canary


def test_a_canary_that_is_not_worse_is_rolled_out():
    for seed, accept in ((2, 0.5), (3, 0.55)):
        result = verdict(random.Random(seed), CONFIG, 3000, canary_accept=accept)
        assert (result.verdict, result.reasons) == ("rollout", ())


def test_too_few_interactions_waits_then_the_last_look_decides():
    small = CanaryConfig(percent=20, min_interactions=5000, looks=3)
    assert verdict(random.Random(4), small, 1000, 0.5, look=1).verdict == "wait"
    last = verdict(random.Random(4), small, 1000, 0.5, look=3)
    assert last.verdict == "rollback" and "fewer than the 5000 needed" in last.reasons[0]


def test_a_live_alarm_rolls_back_at_once_even_before_enough_interactions():
    config = CanaryConfig(percent=20, min_interactions=100_000)
    result = verdict(random.Random(5), config, 4000, canary_accept=0.6, canary_invalid=0.25)
    assert result.verdict == "rollback"
    assert [r.split(":")[0] for r in result.reasons] == ["live alarm"]
    # fewer broken tool calls is good news, never an alarm
    better = verdict(random.Random(5), config, 4000, canary_accept=0.5, canary_invalid=0.03)
    assert better.verdict == "wait"


def test_srm_fires_on_a_deliberately_skewed_split():
    rng = random.Random(6)
    parent = arm_of(users(rng, 1600, 0.5, 0.1))
    canary = arm_of(users(rng, 400 + 120, 0.5, 0.1))  # 24.5 % of users on a 20 % arm
    result = judge(parent, canary, CONFIG, THRESHOLDS, 1)
    assert result.srm.mismatch and result.verdict == "rollback"
    assert result.reasons[0].startswith("sample ratio mismatch")
    fair = judge(parent, arm_of(users(rng, 400, 0.5, 0.1)), CONFIG, THRESHOLDS, 1)
    assert not fair.srm.mismatch


def test_srm_false_alarm_rate_on_fair_splits():
    rng = random.Random(7)
    trials = 4000
    alarms = sum(
        sample_ratio(*split_users(rng, 2000, 20), 20, 0.001).mismatch for _ in range(trials)
    )
    assert alarms / trials <= 0.004  # nominal 0.001


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_rollbacks_on_no_signal_happen_at_the_stated_rate(alpha):
    """Canary and parent serve the same users' taste: every rollback is a false one."""
    rng = random.Random(8)
    config = CanaryConfig(percent=30, min_interactions=300, alpha=alpha)
    trials = 400
    rolled_back = sum(verdict(rng, config, 800, 0.5).verdict == "rollback" for _ in range(trials))
    rate = rolled_back / trials
    # binomial sd at 400 trials is about 0.011 (alpha 0.05) and 0.015 (0.1): 3 sd either side
    assert alpha - 0.045 <= rate <= alpha + 0.045, rate
