"""A test looked at a few times as its users arrive, stopped at the first look that is sure.

A fixed-size A/B test waits for every planned user even when half of them already settle the
question. Looking at the half and stopping when ``|z| >= 1.96`` would err far more often than
the stated 5 % (8.3 % with two looks, 14 % with five). A *group-sequential* design fixes the
looks in advance, at equal shares of the planned users, and raises each look's bound so that
the chance of crossing at *any* look, when nothing changed, is exactly ``alpha``.

The bounds here are O'Brien & Fleming's (1979): ``c_k = C sqrt(K / k)`` at look ``k`` of
``K``, with ``C`` solved so that the two-sided crossing probability is ``alpha``. They are
strict early (2.797 at the half of a two-look test) and close to the fixed test's at the end
(1.977 against 1.960), so the planned size grows by under 3 % to keep the fixed design's power
(``max_size_ratio``), while a large effect stops at an early look.

The crossing probabilities are computed exactly (up to the grid) by the recursion of Armitage,
McPherson & Rowe (1969): the score ``S_k`` (the sum of ``k`` independent stage increments, each
``N(drift, 1)``) has, on the region where no bound was crossed, a density carried from look to
look by a convolution with the increment's normal density. Jennison & Turnbull, *Group
Sequential Methods with Applications to Clinical Trials* (2000), ch. 2 and 19, tabulate what
it gives (``C`` = 1.977, 2.004, 2.024, 2.040 for 2 to 5 looks at 5 %).

The guarantee is asymptotic in the users, as a z-test's is: each look's statistic is taken for
normal with the variance the data estimate. ``tests/stats/test_group_sequential.py`` checks it
on users who differ from one another (some solve every task, some none) through the A/B's own
estimator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

import numpy as np

GRID = 1201  # points across each look's region where no bound was crossed


@dataclass(frozen=True)
class Crossing:
    """Where a design stops, at one drift: per look, the chance of first crossing the upper
    bound and the lower one."""

    upper: tuple[float, ...]
    lower: tuple[float, ...]

    @property
    def any(self) -> float:
        """The chance of crossing at some look, either side."""
        return sum(self.upper) + sum(self.lower)

    def mean_fraction(self) -> float:
        """The expected share of the planned users played: ``k / K`` when the test stops at
        look ``k``, all of them when it crosses nowhere."""
        looks = len(self.upper)
        stopped = [u + d for u, d in zip(self.upper, self.lower, strict=True)]
        played = sum((k + 1) / looks * p for k, p in enumerate(stopped))
        return played + (1.0 - sum(stopped))


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2.0))


def crossing(bounds: tuple[float, ...], drift: float = 0.0) -> Crossing:
    """The chance of first crossing ``z_k >= bounds[k]`` (upper) or ``z_k <= -bounds[k]``
    (lower) at each look, looks at equal shares of the users, when each share moves the score
    by ``drift`` standard deviations (0: nothing changed).

    >>> c = crossing((1.959963984540054,))
    >>> round(c.any, 6), round(c.upper[0], 6)
    (0.05, 0.025)
    """
    if not bounds or any(b <= 0 for b in bounds):
        raise ValueError(f"need at least one positive bound, got {bounds}")
    upper: list[float] = []
    lower: list[float] = []
    grid = weights = density = None
    for k, bound in enumerate(bounds, start=1):
        edge = bound * math.sqrt(k)  # the bound on the score S_k = z_k sqrt(k)
        if grid is None:  # the first look: S_1 ~ N(drift, 1)
            upper.append(float(1.0 - _normal_cdf(np.array(edge - drift))))
            lower.append(float(_normal_cdf(np.array(-edge - drift))))
        else:
            assert weights is not None and density is not None
            mass = weights * density
            upper.append(float(mass @ (1.0 - _normal_cdf(edge - grid - drift))))
            lower.append(float(mass @ _normal_cdf(-edge - grid - drift)))
        if k == len(bounds):  # no later look needs the density carried on
            break
        new_grid = np.linspace(-edge, edge, GRID)
        if grid is None:
            density = np.exp(-0.5 * (new_grid - drift) ** 2) / math.sqrt(2 * math.pi)
        else:
            assert weights is not None and density is not None
            step = new_grid[:, None] - grid[None, :] - drift
            kernel = np.exp(-0.5 * step**2) / math.sqrt(2 * math.pi)
            density = kernel @ (weights * density)
        grid = new_grid
        h = grid[1] - grid[0]
        weights = np.full(GRID, h)  # the trapezoid rule on the new region
        weights[0] = weights[-1] = h / 2
    return Crossing(tuple(upper), tuple(lower))


@cache
def obrien_fleming(looks: int, alpha: float = 0.05) -> tuple[float, ...]:
    """The two-sided O'Brien-Fleming bounds on ``|z|`` for ``looks`` equally spaced looks,
    crossed at some look with probability ``alpha`` when nothing changed.

    >>> [round(b, 3) for b in obrien_fleming(2)]
    [2.797, 1.977]
    >>> obrien_fleming(1) == (NormalDist().inv_cdf(0.975),)
    True
    """
    if looks < 1 or not 0 < alpha < 1:
        raise ValueError(f"need looks >= 1 and 0 < alpha < 1, got {looks}, {alpha}")
    if looks == 1:
        return (NormalDist().inv_cdf(1 - alpha / 2),)

    def shape(c: float) -> tuple[float, ...]:
        return tuple(c * math.sqrt(looks / k) for k in range(1, looks + 1))

    lo, hi = NormalDist().inv_cdf(1 - alpha / 2), 5.0  # crossing falls as C rises
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if crossing(shape(mid)).any > alpha else (lo, mid)
    return shape(hi)


def drift_for_power(bounds: tuple[float, ...], power: float) -> float:
    """The drift per look at which the upper bound is crossed at some look with ``power``."""
    lo, hi = 0.0, 10.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(crossing(bounds, mid).upper) < power else (lo, mid)
    return hi


@cache
def max_size_ratio(bounds: tuple[float, ...], alpha: float = 0.05, power: float = 0.95) -> float:
    """How many times the fixed design's users the sequential one must plan for the same
    power (two-sided level ``alpha``): Jennison & Turnbull's ``R``.

    >>> round(max_size_ratio(obrien_fleming(2), power=0.8), 3)
    1.008
    """
    z = NormalDist().inv_cdf
    looks = len(bounds)
    return looks * drift_for_power(bounds, power) ** 2 / (z(1 - alpha / 2) + z(power)) ** 2


def drift_of(effect_z: float, looks: int) -> float:
    """The drift per look of a design whose full sample would show ``effect_z`` (the effect
    over its standard error at every planned user): ``effect_z / sqrt(looks)``."""
    return effect_z / math.sqrt(looks)
