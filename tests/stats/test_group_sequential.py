"""The closing A/B's looks: the bounds are the published ones, the recursion gives what paths
drawn look by look give, and the A/B's own estimator, looked at twice on users who differ from
one another, errs no more often than stated, where stopping at 1.96 at each look does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stats.group_sequential import crossing, max_size_ratio, obrien_fleming
from tests.support.closing_ab import Arms, stops

Z975 = 1.959963984540054


# Jennison & Turnbull, Group Sequential Methods (2000), Table 2.3 (C_B, two-sided 5 %) and
# Table 2.4 (R, the maximum size over the fixed one, at 80 % power).
@pytest.mark.parametrize(
    ("looks", "c", "ratio"),
    [(2, 1.977, 1.008), (3, 2.004, 1.017), (4, 2.024, 1.024), (5, 2.040, 1.028)],
)
def test_the_bounds_and_sizes_are_the_published_ones(looks: int, c: float, ratio: float) -> None:
    bounds = obrien_fleming(looks)
    assert bounds[-1] == pytest.approx(c, abs=5e-4)
    assert bounds[0] == pytest.approx(bounds[-1] * math.sqrt(looks), rel=1e-9)
    assert max_size_ratio(bounds, power=0.8) == pytest.approx(ratio, abs=1e-3)


@pytest.mark.parametrize("drift", [0.0, 1.3])
def test_the_crossing_chances_are_those_of_paths_drawn_look_by_look(drift: float) -> None:
    bounds, looks, n = obrien_fleming(3), 3, 400_000
    rng = np.random.default_rng(11)
    z = np.cumsum(rng.normal(drift, 1.0, (n, looks)), axis=1) / np.sqrt(np.arange(1, looks + 1))
    over = np.abs(z) >= np.array(bounds)
    first = np.where(over.any(axis=1), over.argmax(axis=1), -1)
    upward = z[np.arange(n), first.clip(0)] > 0
    computed = crossing(bounds, drift)
    for k in range(looks):
        for side, p in ((upward, computed.upper[k]), (~upward, computed.lower[k])):
            drawn = float(np.mean((first == k) & side))
            assert abs(drawn - p) <= 4 * math.sqrt(max(p, 1e-6) * (1 - p) / n) + 1e-5, (k, drawn, p)


def _error_rate(bounds: tuple[float, ...], arms: Arms) -> float:
    looks = stops(seed=5, arms=arms, users=285, bounds=bounds, tests=TESTS)
    return sum(look.crossed for look in looks) / TESTS


TESTS = 3000
ALLOWED = 0.065
"""5 % stated. The estimator's fixed-sample test itself reads 5.4 % here (8,000 simulated tests
without looks: the delta method on about 140 users an arm), and 6.5 % is three standard errors
of 3,000 tests above 5.4 %; stopping at 1.96 at each look reads 8.7-8.9 %."""


@pytest.mark.slow
@pytest.mark.parametrize("spread", [0.02, 0.3])
def test_two_looks_at_the_closing_ab_err_as_often_as_stated(spread: float) -> None:
    """No change between the arms; users of ``spread`` 0.3 are as unlike as users get (some
    solve nearly everything, some nearly nothing). Stopping at 1.96 at each look is the rule
    without the safeguard: it must fail the same check, or the check could not see it."""
    null = Arms(0.375, 0.375, spread)
    assert _error_rate(obrien_fleming(2), null) <= ALLOWED
    assert _error_rate((Z975, Z975), null) > ALLOWED


def test_the_reported_p_value_is_under_5_percent_exactly_when_the_test_stopped_for_a_change() -> (
    None
):
    """The stage-wise p-value the report shows (``Look.p_value``) agrees with the stop; the
    nominal one would call a change at a last look with |z| between 1.960 and 1.977."""
    looks = stops(seed=9, arms=Arms(0.375, 0.46), users=285, bounds=obrien_fleming(2), tests=150)
    assert {look.look for look in looks} == {1, 2}  # some stopped at the half
    assert {look.crossed for look in looks} == {True, False}
    for look in looks:
        assert look.p_value is not None and (look.p_value <= 0.05) == look.crossed, look
