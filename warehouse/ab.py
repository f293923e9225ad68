"""A/B statistics: each metric's relative change, treatment against control, with a 95 % CI. Pure.

Means and rates are ratios of sums over the unit of randomisation (the user):
``R = sum(y) / sum(x)``, e.g. kept edit fractions over measured accepted edits, or rewards over
scored interactions. Users, not interactions, are independent, so the variance of ``R`` comes
from the delta method over per-user sums (Deng, Knoblich & Lu, "Applying the Delta Method in
Metric Analytics", KDD 2018)::

    Var(R) ~ (s_yy - 2 R s_xy + R^2 s_xx) / (n mean(x)^2)

with ``s`` the sample (co)variances of the per-user sums. The relative change
``D = R_t / R_c - 1`` of independent arms has ``Var(D) ~ Var(R_t) / R_c^2 + R_t^2 Var(R_c) / R_c^4``
and the interval is ``D +- 1.96 sqrt(Var(D))`` (normal approximation).

Medians (latency p50) use the same paper's order-statistic interval: the ranks
``n/2 -+ z sqrt(n)/2`` bracket the median with 95 % probability, and half their distance over z is
its standard error. That interval treats interactions as independent (a user's several
interactions are not clustered), a known simplification.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class RatioSums:
    """Per-arm sums over units of x (denominator), y (numerator) and their products."""

    n: int
    sx: float
    sy: float
    sxx: float
    syy: float
    sxy: float

    def estimate(self) -> float | None:
        return None if self.sx == 0 else self.sy / self.sx

    def variance(self) -> float | None:
        """Delta-method variance of sum(y)/sum(x); None with fewer than two units.

        >>> RatioSums(n=4, sx=4, sy=2, sxx=4, syy=2, sxy=2).variance()  # 0/1 outcomes, 1 each
        0.08333333333333333
        """
        r = self.estimate()
        if r is None or self.n < 2:
            return None
        mx, my = self.sx / self.n, self.sy / self.n
        var_x = (self.sxx - self.n * mx * mx) / (self.n - 1)
        var_y = (self.syy - self.n * my * my) / (self.n - 1)
        cov = (self.sxy - self.n * mx * my) / (self.n - 1)
        return max(var_y - 2 * r * cov + r * r * var_x, 0.0) / (self.n * mx * mx)


@dataclass(frozen=True)
class Change:
    """Treatment against control: the relative change and its 95 % interval (None if undefined)."""

    control: float | None
    treatment: float | None
    relative: float | None
    ci_low: float | None
    ci_high: float | None


def relative_change(t: float | None, var_t: float | None, c: float | None,
                    var_c: float | None, z: float = Z95) -> Change:  # fmt: skip
    """``t / c - 1`` with a delta-method interval.

    >>> ch = relative_change(0.55, 0.0001, 0.5, 0.0001)
    >>> round(ch.relative, 4), round(ch.ci_low, 4), round(ch.ci_high, 4)
    (0.1, 0.0417, 0.1583)
    """
    if t is None or c is None or c == 0:
        return Change(c, t, None, None, None)
    rel = t / c - 1.0
    if var_t is None or var_c is None:
        return Change(c, t, rel, None, None)
    half = z * math.sqrt(var_t / c**2 + t * t * var_c / c**4)
    return Change(c, t, rel, rel - half, rel + half)


def median_with_variance(values: Sequence[float], counts: Sequence[int],
                         z: float = Z95) -> tuple[float | None, float | None]:  # fmt: skip
    """Median of a histogram (sorted distinct ``values`` with ``counts``) and its variance.

    The median averages the two middle observations when their number is even.

    >>> median_with_variance([1, 2, 3, 4], [1, 1, 1, 1])[0]
    2.5
    >>> median_with_variance([10], [5])
    (10.0, 0.0)
    """
    n = int(sum(counts))
    if n == 0:
        return None, None
    cumulative = list(itertools.accumulate(counts))

    def order_stat(rank: int) -> float:  # 1-based rank -> value
        return float(values[bisect.bisect_left(cumulative, min(max(rank, 1), n))])

    median = (order_stat((n + 1) // 2) + order_stat(n // 2 + 1)) / 2
    spread = z * math.sqrt(n) / 2
    low, high = order_stat(math.floor(n / 2 - spread)), order_stat(math.ceil(n / 2 + spread) + 1)
    se = (high - low) / (2 * z)
    return median, se * se
