"""The A/B statistics on data with no signal: how often the SRM check and the p-values fire.

A check that states an error rate is shown to keep it: fair splits and null differences are
simulated, and the share of false alarms is compared with the nominal rate (plus three standard
errors of a binomial share over the trials, so that a seed change does not flake).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from warehouse.ab import (
    SRM_ALPHA,
    RatioSums,
    chi2_survival,
    relative_change,
    sample_ratio_mismatch,
)

TRIALS = 2_000


def _noise(rate: float) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / TRIALS)


def test_a_fair_split_passes_and_a_skewed_one_fires():
    fair = sample_ratio_mismatch({"control": 1_000, "treatment": 1_000})
    assert (fair.chi2, fair.p_value, fair.srm) == (0.0, 1.0, False)
    skewed = sample_ratio_mismatch({"control": 1_100, "treatment": 900})
    assert skewed.chi2 == pytest.approx(20.0) and skewed.srm
    assert skewed.p_value == pytest.approx(7.744e-6, rel=1e-3)
    assert skewed.alpha == SRM_ALPHA == 0.001


def test_configured_weights_are_the_expectation():
    canary = {"parent": 1_800, "canary": 200}
    assert not sample_ratio_mismatch(canary, {"parent": 90, "canary": 10}).srm
    assert sample_ratio_mismatch(canary).srm  # against equal shares it is a mismatch
    with pytest.raises(ValueError, match="weights name arms"):
        sample_ratio_mismatch(canary, {"parent": 90, "other": 10})


def test_chi2_survival_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")  # a cross-check only; warehouse/ does not need it
    for df in range(1, 12):
        for x in (0.001, 0.3, 1.0, 2.5, 7.0, 20.0, 80.0, 300.0):
            assert chi2_survival(x, df) == pytest.approx(stats.chi2.sf(x, df), rel=1e-9,
                                                         abs=1e-300)  # fmt: skip


def test_srm_false_alarms_on_fair_splits_stay_at_alpha():
    rng = np.random.default_rng(7)
    users = 2_000
    in_control = rng.binomial(users, 0.5, size=TRIALS)
    for alpha in (SRM_ALPHA, 0.05):
        alarms = sum(
            sample_ratio_mismatch({"control": int(c), "treatment": int(users - c)},
                                  alpha=alpha).srm
            for c in in_control
        )  # fmt: skip
        assert alarms / TRIALS <= alpha + _noise(alpha), (alpha, alarms)
        if alpha == 0.05:  # the chi-square is not conservative either
            assert alarms / TRIALS >= alpha - _noise(alpha), (alpha, alarms)


def _arm(rng: np.random.Generator, users: int, p: float) -> RatioSums:
    """Per-user sums of a rate: each user has 1+Poisson(2) interactions, each a success w.p. p."""
    x = 1 + rng.poisson(2.0, size=users).astype(float)
    y = rng.binomial(x.astype(int), p).astype(float)
    return RatioSums(users, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum())


def test_p_value_and_ci_of_a_null_difference_reject_at_five_percent():
    rng = np.random.default_rng(11)
    rejected = excluded = 0
    for _ in range(TRIALS):
        t, c = _arm(rng, 300, 0.3), _arm(rng, 300, 0.3)
        change = relative_change(t.estimate(), t.variance(), c.estimate(), c.variance())
        assert change.p_value is not None and change.ci_low is not None
        rejected += change.p_value < 0.05
        excluded += not change.ci_low <= 0 <= change.ci_high
    assert rejected == excluded  # the p-value and the interval tell one story
    assert abs(rejected / TRIALS - 0.05) <= _noise(0.05), rejected


@pytest.mark.parametrize(("users", "rate"), [(24, 0.02), (24, 0.05), (100, 0.02)])
def test_rare_events_in_thin_arms_keep_the_stated_false_alarms(users: int, rate: float):
    """Thin arms and a rare event (2 interactions a user). At 24 users and 2 %, about 4 trials
    in 10 have an arm without any event: its variance, read as 0, took the other arm's out of
    the interval too (1 kept edit in 48 against 0 read as -100 % [-100 %, -100 %], p < 0.0001:
    38 % false alarms). Elsewhere the delta method's interval of the relative change shrank
    when the treatment fell below the control by chance: 11 % false alarms at 24 users and 5 %,
    and at 100 users and 2 % (``bench/ab_rare_events.py``). The difference's test and Fieller's
    interval keep them under 5 %, and tell one story."""
    rng = np.random.default_rng(5)
    rejected = tried = one_empty = 0
    for _ in range(TRIALS):
        t, c = _rare_arm(rng, users, rate), _rare_arm(rng, users, rate)
        change = relative_change(t.estimate(), t.variance(), c.estimate(), c.variance())
        if change.p_value is None:  # no event in the control: no relative change
            continue
        tried += 1
        one_empty += t.sy == 0
        rejected += change.p_value < 0.05
        if change.ci_low is not None and change.ci_high is not None:
            assert (change.p_value < 0.05) == (not change.ci_low <= 0 <= change.ci_high)
    if (users, rate) == (24, 0.02):
        assert one_empty > tried / 4  # the case is common here, not a corner
    assert rejected / tried <= 0.05 + _noise(0.05), rejected / tried


def _rare_arm(rng: np.random.Generator, users: int, p: float) -> RatioSums:
    x = np.full(users, 2.0)
    y = rng.binomial(2, p, size=users).astype(float)
    return RatioSums(users, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum())
