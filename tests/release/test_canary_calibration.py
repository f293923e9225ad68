"""The canary's error rates on simulated live traffic where the truth is known
(``release.canary_study``): each world runs at least 200 seeded trials, the canary looked at
as its users arrive (20 looks unless said), the last look past its deadline.

Bounds are the nominal rate plus three Monte-Carlo standard errors of a binomial share over
the trials, so that a seed change does not flake while a broken safeguard still fails.
"""

from __future__ import annotations

import random

import pytest

from release.canary import UserSums, arm_of, judge
from release.canary_config import CanaryConfig
from release.canary_study import Study, World
from rewards.monitors import MonitorThresholds

CONFIG = CanaryConfig()  # 10 %, margin 0.1, alpha 0.05, 100 users per arm, N* 2,000
THRESHOLDS = MonitorThresholds()


def test_one_user_at_minus_one_against_nine_at_plus_half_is_never_rolled_out():
    """The issue's row: the canary arm's variance is undefined, and "could not test" must not
    read as "no harm"; the canary ends rolled back at its deadline, saying why."""
    rng = random.Random(1)
    for _ in range(200):
        parent = arm_of([UserSums(25, 25, 25 * (0.5 + rng.gauss(0, 0.05)), {})
                         for _ in range(9)])  # fmt: skip
        canary = arm_of([UserSums(250, 250, -250.0, {})])
        for config in (CONFIG, CanaryConfig(min_users=2)):
            verdicts = [judge(parent, canary, config, THRESHOLDS, look, expired=look == 5)
                        for look in range(1, 6)]  # fmt: skip
            assert [v.verdict for v in verdicts] == ["wait"] * 4 + ["rollback"]
            assert "1 canary users with a scored interaction" in verdicts[-1].reasons[0]
    assert verdicts[-1].srm.p_value > 0.5  # the split itself looks fine


def test_a_reward_on_one_user_is_uninformative_never_no_harm():
    parent = arm_of([UserSums(10, 10, 5.0 + k, {}) for k in range(200)])
    canary = arm_of([UserSums(10, 10, 5.0 + k, {}) for k in range(1)] * 1)
    config = CanaryConfig(min_users=2, percent=0.5)
    verdict = judge(parent, canary, config, THRESHOLDS, 1)
    reward = verdict.comparisons[0]
    assert (reward.informative, reward.p_value, reward.low) == (False, None, None)
    assert verdict.verdict == "wait"


def test_two_hundred_canary_users_without_a_scored_interaction_are_never_rolled_out():
    study = Study(World(censored=(0.05, 1.0), looks=5), CONFIG, trials=200, seed=2).run()
    assert not any(o.rolled_out_ever for o in study.outcomes)
    assert study.rate("rollback") == 1.0
    # the censored-share guardrail catches the "make it unscorable" hack before the deadline
    assert study.reasons()["guardrail"] >= 0.9 * study.trials, study.reasons()


def test_a_thin_canary_of_a_few_similar_users_is_never_rolled_out():
    """About 5 users on the canary (0.25 %), 70 % of the population likes it a little and 30 %
    hates it (true difference -0.16, worse than the margin). A few users who happen to agree
    have a small sample variance; without the minimum of users this rolls out 40 % of them."""
    world = World(percent=0.25, interactions=50, bimodal=(0.7, 0.2, -1.0), looks=5)
    study = Study(world, CanaryConfig(percent=0.25), trials=200, seed=3).run()
    assert study.rate("rollout") == 0.0
    assert study.reasons()["deadline of 336 h passed"] >= 0.95 * study.trials


def test_a_canary_worse_by_the_margin_is_rolled_out_at_most_alpha_across_looks():
    """2,000 users, 10 % share, 20 looks: with a fixed-sample interval at each look this is
    about three times alpha."""
    study = Study(World(delta=-CONFIG.margin), CONFIG, trials=400, seed=4).run()
    rate = study.rate("rollout")
    print(f"false rollout at the margin: {rate:.4f} (nominal {CONFIG.alpha})")
    assert rate <= CONFIG.alpha + study.noise(CONFIG.alpha), rate


def test_a_worse_canary_that_hides_its_worst_interactions_is_rolled_out_at_most_alpha():
    """Worse than the margin (-0.12, noisy rewards) and leaving its worst 2.5 % of interactions
    unscored: its scored mean looks 0.12 better, and its censored share rises by 2.5 points,
    under the guardrail's 3-point threshold (it still fires on about a quarter). The excess
    censored share counts at the reward's minimum (``release.canary_estimand``): rolled out
    0.005 of 400 trials; judged on its scored interactions alone (the max removed, broken once
    on purpose) 0.0975, and this test failed."""
    world = World(delta=-0.12, noise_sd=2.0, censor_worst=0.025)
    study = Study(world, CONFIG, trials=400, seed=8).run()
    rate = study.rate("rollout")
    print(f"false rollout, worst hidden: {rate:.4f} (nominal {CONFIG.alpha})")
    assert rate <= CONFIG.alpha + study.noise(CONFIG.alpha), study.reasons()


# The heaviest users arrive first and gain from the canary (+0.3); the rest, arriving later,
# lose (-0.77): over everyone the mean reward per scored interaction is exactly -margin.
ARRIVAL = World(interactions=2.0, heavy=(0.1, 30.0, 0.3, -0.1 / 0.375 - 0.625 * 0.3 / 0.375),
                heavy_first=True)  # fmt: skip


def test_a_canary_whose_heavy_users_arrive_first_is_rolled_out_at_most_alpha():
    """Post-stratified by activity before the canary, weights fixed beforehand (heavy users'
    expected share of the interactions, 0.625), no verdict while a stratum is thin: the early
    looks' heavy users do not speak for the rest. Rolled out 0 of 400; pooled instead (no
    strata, broken on purpose) 0.175, with or without the minimum exposure."""
    assert ARRIVAL.truth() == pytest.approx(-CONFIG.margin)
    fixed = CanaryConfig(strata=ARRIVAL.strata_weights())
    study = Study(ARRIVAL, fixed, trials=400, seed=10).run()
    rate = study.rate("rollout")
    print(f"false rollout, heavy users first, stratified: {rate:.4f}")
    assert rate <= CONFIG.alpha + study.noise(CONFIG.alpha), study.reasons()
    pooled = Study(ARRIVAL, CONFIG, trials=400, seed=10).run().rate("rollout")
    print(f"false rollout, heavy users first, pooled: {pooled:.4f}")
    assert pooled > CONFIG.alpha + study.noise(CONFIG.alpha)


def test_a_better_canary_with_heavy_users_first_is_rolled_out_but_not_before_a_week():
    """Power of the stratified canary (true gain +0.11: +0.15 on heavy users, 0.6 of the
    interactions, +0.05 on the rest): 0.83. And the minimum exposure: the looks are spread over
    the 336 h deadline, and no rollout comes before 168 h (look 10 of 20)."""
    world = World(interactions=2.0, heavy=(0.2, 12.0, 0.15, 0.05), heavy_first=True)
    study = Study(world, CanaryConfig(strata=world.strata_weights()), trials=200, seed=11).run()
    print(f"rollout rate, stratified, heavy first: {study.rate('rollout'):.3f}")
    assert study.rate("rollout") >= 0.7, study.reasons()
    assert min(o.look for o in study.outcomes if o.verdict == "rollout") >= 10


def test_no_signal_false_rollbacks_are_bounded_and_reported():
    """No difference anywhere. Rollbacks before the deadline come from the SRM check, the
    guardrails and a reward bound below the margin: at most guardrail_alpha + alpha (+ the SRM
    check's 0.001 a look). Undecided canaries are rolled back at the deadline: how many
    depends on the traffic, and is reported (with 6,000 users at 20 %, almost none)."""
    config = CanaryConfig(percent=20)
    study = Study(World(users=6000, percent=20), config, trials=200, seed=5).run()
    early = sum(o.verdict == "rollback" and not o.reasons[0].startswith("deadline")
                for o in study.outcomes) / study.trials  # fmt: skip
    total = study.rate("rollback")
    print(f"no-signal rollbacks: {total:.3f} in all, {early:.3f} before the deadline")
    bound = config.guardrail_alpha + config.alpha + 20 * config.srm_alpha
    assert early <= bound + study.noise(bound), study.reasons()
    assert total <= 0.1, study.reasons()
    # and in the thin world of the margin test, most no-signal canaries stay undecided
    thin = Study(World(), CONFIG, trials=200, seed=6).run()
    print(f"no-signal, 2,000 users at 10 %: rolled out {thin.rate('rollout'):.3f}")
    assert 0.2 <= thin.rate("rollout") <= 0.8, thin.reasons()


@pytest.mark.parametrize(
    ("world", "verdict", "at_least"),
    [
        (World(delta=0.05), "rollout", 0.75),  # better by 0.05: measured 0.89
        (World(delta=-0.3), "rollback", 0.95),
        (World(invalid=(0.1, 0.2)), "rollback", 0.9),  # a guardrail in its bad direction
    ],
    ids=["better", "much-worse", "invalid-calls-up"],
)
def test_power(world, verdict, at_least):
    study = Study(world, CONFIG, trials=200, seed=7).run()
    print(f"{verdict} rate: {study.rate(verdict):.3f}")
    assert study.rate(verdict) >= at_least, study.reasons()
