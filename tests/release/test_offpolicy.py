"""The gate's statistics on simulated rounds without users (each interaction its own unit), where
the truth is known: with rewards that carry no signal the lower bound promotes about 5 % of
candidates (nominal level 95 %), a point estimate about half; with a real gain the bound finds
it; long completions whose weights run away are clipped, and the clip only lowers the estimate
(not necessarily the bound: see ``release.offpolicy_bound``).
User-level worlds, collapse and retries: ``tests/release/test_gate_calibration.py``."""

from __future__ import annotations

import numpy as np

from release.gate import GateConfig, decide
from release.offpolicy_bound import estimate_gain, sequence_log_weights


def _round(rng: np.random.Generator, n: int, gain: float, tokens: int = 8):
    """One round's held-out rollouts: per-token log-probs of the behaviour and of a candidate
    that moved away from it, and rewards. With ``gain`` 0 the rewards ignore the completions
    (indifferent users); otherwise completions the candidate favours earn more."""
    behaviour = np.log(rng.uniform(0.05, 1.0, size=(n, tokens)))
    # log-normal ratios with mean 1, as a candidate that is a distribution has them under
    # the behaviour's samples (E[w] = 1: the plain importance-sampling mean is unbiased)
    shift = rng.normal(0, 0.15, size=(n, tokens)) - 0.15**2 / 2
    favoured = shift.sum(1) > 0
    reward = rng.binomial(1, 0.4 + gain * favoured).astype(float)
    return list(behaviour), list(behaviour + shift), list(reward)


def _estimate(behaviour, candidate, rewards, **kwargs):
    log_w = sequence_log_weights(behaviour, candidate)
    units = [f"i{k}" for k in range(len(rewards))]
    return estimate_gain(units, rewards, log_w, reward_min=0.0, reward_max=1.0, **kwargs)


def test_no_signal_promotes_at_about_the_nominal_rate():
    rng = np.random.default_rng(7)
    rounds = 200
    by_bound = by_point = 0
    for k in range(rounds):
        est = _estimate(*_round(rng, 300, gain=0.0), resamples=500, seed=k)
        by_bound += decide(est, [], GateConfig(min_examples=1)).passed
        by_point += est.gain >= 0
    assert by_bound / rounds <= 0.05 + 3 * (0.05 * 0.95 / rounds) ** 0.5  # nominal 0.05
    assert 0.3 < by_point / rounds < 0.7  # what the point estimate did: a coin flip


def test_a_real_gain_is_found():
    rng = np.random.default_rng(8)
    found = 0
    for k in range(40):
        est = _estimate(*_round(rng, 600, gain=0.3), resamples=500, seed=k)
        found += decide(est, [], GateConfig(min_examples=1)).passed
    assert found / 40 >= 0.8


def test_runaway_weights_of_long_completions_are_clipped_and_only_lower_the_estimate():
    rng = np.random.default_rng(9)
    # long completions of a candidate that sharpened a few tokens a lot (ratio 5 on 3 % of them)
    behaviour = [np.log(rng.uniform(0.05, 1.0, size=200)) for _ in range(300)]
    candidate = [b + rng.normal(0.0, 0.05, 200) + 1.6 * (rng.random(200) < 0.03) for b in behaviour]
    rewards = list(rng.binomial(1, 0.5, size=300).astype(float))
    wide = _estimate(behaviour, candidate, rewards, weight_cap=1e300, resamples=200)
    clipped = _estimate(behaviour, candidate, rewards, weight_cap=10.0, resamples=200)
    assert clipped.clipped > 100 and wide.clipped == 0
    assert clipped.value < wide.value
    # the bound covers the clipped gain, at most the true one; on this sample it rises with the
    # clip, which also takes away the runaway weights' variance: unclipped, they leave nothing
    # but the worst gain the range allows
    assert wide.lower == -1.0 < clipped.lower < clipped.gain
    assert clipped.kl > wide.kl  # the KL figure is of the clipped weights too, never lower
