"""The canary's verdict on simulated live A/B data: a worse candidate is rolled back, one that
is not worse is rolled out, a skewed split and a guardrail roll back, a thin canary waits and
is rolled back at its deadline. Error rates over many looks: tests/release/."""

from __future__ import annotations

import math
import random

from release.canary import UserSums, arm_of, judge, sample_ratio
from release.canary_config import CanaryConfig
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


CONFIG = CanaryConfig(percent=20, min_users=100, margin=0.1)


def test_a_worse_canary_is_rolled_back():
    result = verdict(random.Random(1), CONFIG, 3000, canary_accept=0.40)
    assert result.verdict == "rollback"
    assert any(r.startswith("live reward worse") for r in result.reasons)
    reward = result.comparisons[0]
    assert reward.alarm and reward.high < -CONFIG.margin < 0 < reward.parent - reward.canary


def test_a_canary_that_is_not_worse_is_rolled_out():
    for seed, accept in ((2, 0.5), (3, 0.55)):
        result = verdict(random.Random(seed), CONFIG, 3000, canary_accept=accept)
        assert (result.verdict, result.reasons) == ("rollout", ())


def test_too_few_users_waits_then_the_deadline_rolls_back():
    small = CanaryConfig(percent=20, min_users=500)
    assert verdict(random.Random(4), small, 1000, 0.5, look=1).verdict == "wait"
    last = judge_expired(random.Random(4), small, 1000, 0.5)
    assert last.verdict == "rollback" and last.reasons[0].startswith("deadline of 336 h passed")
    assert "500 needed in each arm" in last.reasons[0]


def judge_expired(rng: random.Random, config: CanaryConfig, total: int, accept: float):  # noqa: ANN201
    n_parent, n_canary = split_users(rng, total, config.percent)
    parent, canary = (
        arm_of(users(rng, n_parent, 0.5, 0.1)),
        arm_of(users(rng, n_canary, accept, 0.1)),
    )
    return judge(parent, canary, config, THRESHOLDS, 9, expired=True)


def test_legacy_config_of_a_live_canary_is_judged_by_the_current_rules():
    old = {"percent": 30.0, "min_interactions": 30, "alpha": 0.05, "looks": 5,
           "srm_alpha": 0.001, "max_loss": 0.0}  # fmt: skip
    config = CanaryConfig.model_validate(old)
    assert (config.percent, config.min_users, config.margin) == (30.0, 100, 0.1)


def test_a_guardrail_rolls_back_at_once_even_before_enough_users():
    config = CanaryConfig(percent=20, min_users=100_000)
    result = verdict(random.Random(5), config, 4000, canary_accept=0.6, canary_invalid=0.25)
    assert result.verdict == "rollback"
    assert [r.split(":")[0] for r in result.reasons] == ["guardrail"]
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


def _false_srm_alarms(trials: int, looks: int, alpha: float) -> tuple[float, float]:
    """Shares of correct 10 % splits whose SRM check fired at any of ``looks`` looks (one
    after each new user, from the 20th): the anytime-valid test, and a chi-square re-run."""
    rng = random.Random(17)
    sequential = repeated_chi2 = 0
    for _ in range(trials):
        canary = 0
        fired = [False, False]
        for n in range(1, looks + 20):
            canary += rng.random() < 0.1
            if n < 20:
                continue
            srm = sample_ratio(n - canary, canary, 10, alpha)
            fired[0] = fired[0] or srm.mismatch
            fired[1] = fired[1] or math.erfc(math.sqrt(srm.chi2 / 2)) < alpha
            if all(fired):
                break
        sequential += fired[0]
        repeated_chi2 += fired[1]
    return sequential / trials, repeated_chi2 / trials


def test_srm_checked_at_every_look_keeps_its_false_alarm_rate():
    """2,000 looks at a correct 10 % split: the check fires in at most alpha of canaries
    (+3 Monte-Carlo standard errors). A chi-square re-run at every look (the check before it,
    the break) fired in several times that."""
    sequential, repeated_chi2 = _false_srm_alarms(trials=300, looks=2000, alpha=0.01)
    se = (0.01 * 0.99 / 300) ** 0.5
    assert sequential <= 0.01 + 3 * se, sequential
    assert repeated_chi2 > 0.01 + 3 * se, repeated_chi2


def test_users_seen_in_both_arms_past_the_allowed_share_roll_the_canary_back():
    """A split that puts one person in both arms cannot be read as an A/B. A few such users
    (at most 1 % of all) are counted and tolerated; more roll the canary back. Without the
    check (crossed users ignored, as before) this canary waited."""
    rng = random.Random(9)
    parent = arm_of(users(rng, 800, 0.5, 0.1))
    canary = arm_of(users(rng, 200, 0.5, 0.1))  # the 20 % split
    few = judge(parent, canary, CONFIG, THRESHOLDS, 1, crossed=9)
    many = judge(parent, canary, CONFIG, THRESHOLDS, 1, crossed=30)
    assert few.verdict != "rollback"
    assert many.verdict == "rollback" and many.reasons[0].startswith("users in both arms: 30")
