"""The offline gate's error rates on simulated serving logs where the truth is known (``worlds``):
users with Zipf-like activity and their own taste, a candidate that piles onto a disliked rare
completion, eight retries on one parent, and real gains. Each world runs >= 200 seeded trials of
the whole gate (``release.gate.decide`` on ``release.offpolicy_bound``'s estimate).

A false-promotion rate passes when it is at most the nominal alpha plus three Monte-Carlo
standard errors of a rate at alpha: ``alpha + 3 sqrt(alpha (1 - alpha) / trials)``. The null
worlds are held to it at a first attempt's level and at 95 %, 400 trials each; a world of six to
eight users shows what the small-sample bound is for (the percentile bootstrap exceeds it there).
Both bounds the gate takes are held to the same rates: the clipped one (rows served with a
nucleus) and the centred, untruncated one (rows served with full support; these worlds' policies
give every completion type some mass).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from release.gate import attempt_level
from release.offpolicy_bound import (
    BM_CENTRED_METHOD,
    BM_METHOD,
    CENTRED_METHOD,
    METHOD,
    PERCENTILE_METHOD,
)
from tests.release import worlds
from tests.release.worlds import (
    CENSORED_DRIFT,
    CENSORED_GAIN,
    CENSORED_HACK,
    COLLAPSE,
    FEW_USERS,
    GATE_CONFIG,
    NULL_WORLDS,
    POWER_WORLDS,
    RETRY_WORLD,
    STRONG_TASTES,
    World,
    promoted,
    retry_candidate,
)

BOUNDS = (METHOD, CENTRED_METHOD)
TRIALS = 200
NULL_TRIALS = 400
RESAMPLES = 500


def ceiling(alpha: float, trials: int = TRIALS) -> float:
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)


def promotion_rate(world: World, seed: int, trials: int = TRIALS, **kwargs: object) -> float:
    return worlds.promotion_rate(world, trials, seed, RESAMPLES, **kwargs)


@pytest.mark.parametrize("method", BOUNDS)
@pytest.mark.parametrize("level", [0.95, attempt_level(0.95, 1)], ids=["alpha 0.05", "attempt 1"])
@pytest.mark.parametrize("world", NULL_WORLDS, ids=lambda w: w.name)
def test_no_gain_promotes_at_most_at_the_nominal_rate(world: World, level: float,
                                                      method: str) -> None:  # fmt: skip
    assert world.true_gain() == pytest.approx(0.0, abs=1e-12)
    rate = promotion_rate(world, seed=1, trials=NULL_TRIALS, level=level, method=method)
    alpha = 1 - level
    assert rate <= ceiling(alpha, NULL_TRIALS), (
        f"{world.name}: promoted {rate:.3f}, nominal {alpha}"
    )


def test_with_few_users_the_small_sample_bound_holds_where_the_percentile_one_does_not() -> None:
    """Six to eight users: the percentile bootstrap over users promotes about twice its 5 %
    (a handful of tastes, and a quantile as if they were many); the CR2 bound with its
    Bell-McCaffrey t holds it. 800 trials: the two expected rates (about 0.10 and 0.055) lie
    well either side of the ceiling (0.073)."""
    trials = 800
    assert FEW_USERS.true_gain() == pytest.approx(0.0, abs=1e-12)
    percentile = promotion_rate(FEW_USERS, seed=6, trials=trials, method=PERCENTILE_METHOD)
    assert percentile > ceiling(0.05, trials), f"percentile promoted {percentile:.3f}"
    for method in BOUNDS:
        corrected = promotion_rate(FEW_USERS, seed=6, trials=trials, method=method)
        assert corrected <= ceiling(0.05, trials), f"{method} promoted {corrected:.3f}"


@pytest.mark.parametrize(("method", "fewer"), [(METHOD, BM_METHOD),
                                               (CENTRED_METHOD, BM_CENTRED_METHOD)])  # fmt: skip
def test_with_few_users_of_strong_tastes_the_imbens_kolesar_df_hold_where_bm_do_not(
    method: str, fewer: str
) -> None:
    """10-30 users with steep activity, each outright liking or disliking the candidate's
    favourite: the Bell-McCaffrey degrees of freedom (interactions independent within a user)
    promote 0.08-0.09 at a nominal 5 %; the fewer of those and Imbens-Kolesar's at an upper
    bound of the within-user correlation hold it (about 0.02). 800 trials: ceiling 0.073."""
    trials = 800
    assert STRONG_TASTES.true_gain() == pytest.approx(0.0, abs=1e-12)
    rate = promotion_rate(STRONG_TASTES, seed=9, trials=trials, level=0.95, method=method)
    assert rate <= ceiling(0.05, trials), f"{method} promoted {rate:.3f}"
    before = promotion_rate(STRONG_TASTES, seed=9, trials=trials, level=0.95, method=fewer)
    assert before > ceiling(0.05, trials), f"{fewer} promoted {before:.3f}"


def test_resampling_interactions_instead_of_users_is_what_fails() -> None:
    """The same null world with every interaction its own unit: the heavy users' taste is
    taken for evidence, and the rate is well above nominal (why the unit is the user)."""
    world = NULL_WORLDS[1]
    assert promotion_rate(world, seed=1, by_interaction=True) > ceiling(0.05)


@pytest.mark.parametrize("method", BOUNDS)
@pytest.mark.parametrize("world", [CENSORED_DRIFT, CENSORED_HACK], ids=lambda w: w.name)
def test_censored_interactions_do_not_make_a_worse_candidate_look_better(
    world: World, method: str
) -> None:
    """Interactions without a reward stay in the evidence: a candidate that trades liked but
    often unscored completions for always-scored worse ones, or one that makes its outcomes
    unscorable, is promoted at most at the nominal rate (here: never, the true gains being
    -0.05 and -0.18)."""
    assert world.true_gain() < -0.04
    rate = promotion_rate(world, seed=7, method=method)
    assert rate <= ceiling(0.05), f"{world.name}: promoted {rate:.3f}"


def test_dropping_the_censored_interactions_is_what_fails() -> None:
    """The same drift world with the censored interactions left out of the evidence (what
    ``read_examples`` did): the clipped estimate sees a gain where there is a loss and promotes
    most candidates (about 0.9 of trials)."""
    assert promotion_rate(CENSORED_DRIFT, seed=7, scored_only=True) > 0.5


@pytest.mark.parametrize("method", BOUNDS)
def test_a_real_gain_with_censoring_is_promoted(method: str) -> None:
    """A candidate that moves toward the better completion, scored less often (80 %), still
    passes: true gain +0.089 on scored interactions. Power about 0.85 (clipped) and 0.95
    (centred) at 400 interactions; the test asks for half."""
    assert CENSORED_GAIN.true_gain() == pytest.approx(0.0894, abs=1e-4)
    assert promotion_rate(CENSORED_GAIN, seed=8, method=method) > 0.5


def _old_truncated_snis_gain(draw: object) -> float:
    """What the gate computed before: per-token ratios capped at 2, self-normalised."""
    behaviour = np.asarray(draw.behaviour_logprobs)  # type: ignore[attr-defined]
    candidate = np.asarray(draw.candidate_logprobs)  # type: ignore[attr-defined]
    w = np.exp(np.minimum(candidate - behaviour, math.log(2.0)).sum(1))
    rewards = draw.rewards  # type: ignore[attr-defined]
    return float((w * rewards).sum() / w.sum() - rewards.mean())


@pytest.mark.parametrize("method", BOUNDS)
def test_a_candidate_that_piles_onto_a_disliked_rare_completion_is_rejected(method: str) -> None:
    """Rejected in every trial, by the clip's lost mass or, untruncated, by its whole weight and
    by the mass a draw that barely saw the rare completion misses (credited with the worst
    reward: without that, the centred bound promoted about 1.5 % of these)."""
    assert COLLAPSE.true_gain() == pytest.approx(-0.084)
    rng = np.random.default_rng(2)
    passed, old_gains, kls, ess = 0, [], [], []
    for trial in range(TRIALS):
        draw = COLLAPSE.draw(rng, COLLAPSE.population(rng))
        estimate = draw.estimate(resamples=RESAMPLES, seed=trial, method=method)
        passed += promoted(estimate)
        old_gains.append(_old_truncated_snis_gain(draw))
        kls.append(estimate.kl)
        ess.append(estimate.ess / estimate.n)
    assert passed == 0
    # the world is the hard one: inside the KL and ESS limits on clipped weights (the rare
    # completion's whole weight, 21, is what the untruncated ESS sees), and the truncated
    # self-normalised estimate saw a gain where there is a loss
    assert np.mean(kls) < GATE_CONFIG.max_kl
    assert (np.mean(ess) > GATE_CONFIG.min_ess_fraction) == (method == METHOD)
    assert np.mean(old_gains) > 0.05


@pytest.mark.parametrize("method", BOUNDS)
@pytest.mark.parametrize("spend", [True, False], ids=["alpha spent", "alpha each time"])
def test_retries_on_one_parent_keep_the_family_rate(spend: bool, method: str) -> None:
    """Eight attempts on one parent, each on all held-out data so far (the same users): with
    alpha split across attempts the chance of any false promotion stays at the nominal 5 %;
    testing each attempt at the full alpha is what the spend-once rule prevents (about 0.12-0.14
    of parents get a false promotion; 400 trials, ceiling 0.083)."""
    trials = 400
    rng = np.random.default_rng(3)
    ever = 0
    for trial in range(trials):
        population = RETRY_WORLD.population(rng)
        data = None
        for attempt in range(1, 9):
            new = RETRY_WORLD.draw(rng, population)
            data = new if data is None else data + new
            level = attempt_level(0.95, attempt) if spend else 0.95
            candidate = retry_candidate(attempt)
            assert RETRY_WORLD.true_gain(candidate) == pytest.approx(0.0)
            estimate = data.scored_by(candidate).estimate(
                resamples=RESAMPLES, seed=trial * 8 + attempt, level=level, method=method
            )
            if promoted(estimate):
                ever += 1
                break
    if spend:
        assert ever / trials <= ceiling(0.05, trials)
    else:
        assert ever / trials > ceiling(0.05, trials)


@pytest.mark.parametrize("world, method, floor",
                         [(POWER_WORLDS[0], METHOD, 0.4), (POWER_WORLDS[1], METHOD, 0.8),
                          (POWER_WORLDS[0], CENTRED_METHOD, 0.7),
                          (POWER_WORLDS[1], CENTRED_METHOD, 0.97)],
                         ids=lambda v: getattr(v, "name", ""))  # fmt: skip
def test_a_real_gain_is_still_promoted(world: World, method: str, floor: float) -> None:
    """The centred bound pays no variance for the reward's shift: at gain +0.08 it promotes
    about 0.82 where the clipped one promotes about 0.51 (0.94 and 0.73 with the
    Bell-McCaffrey degrees of freedom, which do not hold where users' tastes dominate)."""
    assert world.true_gain() > 0.05
    level = attempt_level(0.95, 1)  # a first attempt, as rtrl train judges it
    rate = promotion_rate(world, seed=4, level=level, method=method)
    assert rate >= floor, f"{world.name}: promoted {rate:.3f}"


def test_the_clip_only_lowers_the_estimate_and_what_the_bound_covers() -> None:
    """Same draw: a tighter clip never lifts the estimate, nor the percentile bound (every
    resample's gain falls). The CR2 bound may rise on a draw, the clip also removing variance,
    but what it covers, the clipped gain (the estimate's mean over draws), falls with the clip
    and stays below the true gain (``release.offpolicy_bound``)."""
    rng = np.random.default_rng(5)
    caps = [1.0, 2.0, 5.0, 25.0, 1e9]
    means = np.zeros(len(caps))
    for trial in range(40):
        draw = COLLAPSE.draw(rng, COLLAPSE.population(rng))
        estimates = [draw.estimate(resamples=200, seed=trial, weight_cap=c) for c in caps]
        values = [e.value for e in estimates]
        percentile = [draw.estimate(resamples=200, seed=trial, weight_cap=c,
                                    method=PERCENTILE_METHOD).lower for c in caps]  # fmt: skip
        assert values == sorted(values) and percentile == sorted(percentile)
        means += [e.gain for e in estimates]
    means /= 40
    assert list(means) == sorted(means)
    assert means[-1] == pytest.approx(COLLAPSE.true_gain(), abs=0.03)
