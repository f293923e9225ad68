"""A/B statistics: each metric's relative change, treatment against control, with a 95 % CI. Pure.

Means and rates are ratios of sums over the unit of randomisation (the user):
``R = sum(y) / sum(x)``, e.g. kept edit fractions over measured accepted edits, or rewards over
scored interactions. Users, not interactions, are independent, so the variance of ``R`` comes
from the delta method over per-user sums (Deng, Knoblich & Lu, "Applying the Delta Method in
Metric Analytics", KDD 2018)::

    Var(R) ~ (s_yy - 2 R s_xy + R^2 s_xx) / (n mean(x)^2)

with ``s`` the sample (co)variances of the per-user sums. The relative change
``D = (R_t - R_c) / |R_c|`` (``R_t / R_c - 1`` when ``R_c > 0``) of independent arms is tested
by the difference, ``z = (R_t - R_c) / sqrt(Var(R_t) + Var(R_c))``, and its interval is
Fieller's (:func:`relative_change`): the ratios the same test does not reject, so it holds 0
exactly when ``p >= 0.05``, and it has no finite bounds when the control cannot be told from 0.

Medians (latency p50) use the same paper's order-statistic interval: the ranks
``n/2 -+ z sqrt(n)/2`` bracket the median with 95 % probability, and half their distance over z is
its standard error. That interval treats interactions as independent (a user's several
interactions are not clustered), a known simplification of the fixed-sample report; the
anytime-valid figures below rest on users as their units, so the median has none there.

Each change also has a two-sided p-value for "no change", from the same normal approximation:
``p = 2 (1 - Phi(|z|))`` with ``z`` the difference's, so ``p < 0.05`` exactly when the 95 %
interval excludes 0.

Read once, that p-value and interval are right; a mart refreshed and read repeatedly is not read
once. For that reader each change also has an anytime-valid 95 % interval and p-value
(``sequential_change``: the normal-mixture confidence sequence of :mod:`stats.sequential` over
the users of both arms, tightest at ``SEQUENTIAL_TUNING_USERS``), which keep their 5 % however
often the report is refreshed and looked at. Across the metrics and arms of one report the
p-values are adjusted by Holm (:mod:`stats.multiple`), so that the chance of any false alarm
among them, not of each, is 5 %.

The sample-ratio-mismatch (SRM) check asks whether the users split between the arms as the
experiment was configured to split them: Pearson's chi-square of the observed users per arm
against the expected shares, with ``arms - 1`` degrees of freedom. A mismatch means the
assignment or the logging is broken (an arm loses events, a bot lands in one arm), and then no
metric of the experiment can be trusted, however significant. The flag is raised at
``p < 0.001``, the threshold in common use for SRM (Fabijan et al., "Diagnosing Sample Ratio
Mismatch in Online Controlled Experiments", KDD 2019): the check runs on every experiment and
every refresh, so it must rarely fire by chance, and a real mismatch on thousands of users
gives far smaller p-values.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from stats.sequential import Difference, anytime_bound

Z95 = 1.959963984540054
SRM_ALPHA = 0.001  # the usual threshold of the sample-ratio-mismatch check
_ROUNDING = 1e-12  # differences this small are floating-point rounding, not data
SEQUENTIAL_ALPHA = 0.05
SEQUENTIAL_TUNING_USERS = 5_000  # N*: the users (both arms) where the sequence is tightest


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
    p_value: float | None = None  # two-sided, for "no change"


def normal_two_sided_p(z_score: float) -> float:
    """``P(|Z| >= |z|)`` for a standard normal ``Z``.

    >>> round(normal_two_sided_p(1.959963984540054), 6)
    0.05
    >>> normal_two_sided_p(0.0)
    1.0
    """
    return math.erfc(abs(z_score) / math.sqrt(2.0))


def relative_change(t: float | None, var_t: float | None, c: float | None,
                    var_c: float | None, z: float = Z95) -> Change:  # fmt: skip
    """``(t - c) / |c|`` (``t / c - 1`` for a positive control), the two-sided p-value of "no
    change" and the 95 % interval. Dividing by ``|c|`` keeps the sign of the change that of
    ``t - c`` when the control is negative (a mean reward of -0.19 rising to -0.06 is +68 %,
    not -68 %).

    The p-value tests the difference: ``z = (t - c) / sqrt(Var t + Var c)``. The interval is
    Fieller's: every ratio ``theta = t / c`` that the same test does not reject,
    ``(t - theta c)^2 <= z^2 (Var t + theta^2 Var c)``, as a relative change. So the interval
    holds 0 exactly when the p-value is 0.05 or more, and the control's own noise widens it;
    where the control's mean cannot be told from 0 (``c^2 <= z^2 Var c``) the set has no finite
    bounds and the interval is None. The delta method's interval (``D +- z se`` with
    ``Var D = Var t / c^2 + t^2 Var c / c^4``) was used before: its ``se`` shrinks when ``t``
    falls below ``c`` by chance, so with rare events in thin arms it called chance falls 7-11 %
    of the time where 5 % is stated (``bench/ab_rare_events.py``).

    >>> ch = relative_change(0.55, 0.0001, 0.5, 0.0001)
    >>> round(ch.relative, 4), round(ch.ci_low, 4), round(ch.ci_high, 4), round(ch.p_value, 5)
    (0.1, 0.0433, 0.16, 0.00041)
    >>> up = relative_change(-0.06, 0.0001, -0.19, 0.0001)
    >>> round(up.relative, 4), up.ci_low > 0
    (0.6842, True)
    >>> relative_change(0.3, 0.01, 0.1, 0.01).ci_low is None  # a control of 0.1 +- 0.1
    True
    """
    start = _compared(t, var_t, c, var_c)
    if isinstance(start, Change):
        return start
    t, c, rel, var_t, var_c, sd = start
    if sd <= _ROUNDING * max(1.0, abs(c), abs(t)):  # no spread beyond rounding: nothing varies
        no_change = abs(rel) <= _ROUNDING
        return Change(c, t, rel, rel, rel, 1.0 if no_change else 0.0)
    p = normal_two_sided_p((t - c) / sd)
    low, high = _fieller(t, var_t, c, var_c, z)
    return Change(c, t, rel, low, high, p)


class _Compared(NamedTuple):
    """Two arms' means, the relative change, their variances (see :func:`_with_spread`) and
    the difference's standard deviation."""

    t: float
    c: float
    rel: float
    var_t: float
    var_c: float
    sd: float


def _compared(
    t: float | None, var_t: float | None, c: float | None, var_c: float | None
) -> Change | _Compared:
    """Where both changes start (or, without a control mean or a spread, the Change that is
    all there is to say)."""
    if t is None or c is None or c == 0:
        return Change(c, t, None, None, None)
    rel = (t - c) / abs(c)
    spread = _with_spread(var_t, var_c)
    if spread is None:
        return Change(c, t, rel, None, None)
    var_t, var_c = spread
    return _Compared(t, c, rel, var_t, var_c, math.sqrt(var_t + var_c))


def _with_spread(var_t: float | None, var_c: float | None) -> tuple[float, float] | None:
    """The arms' variances, an arm with no spread (a rare event none of its users had) given
    the other arm's, as under no change: read as 0, its mean would be taken for certain (1
    kept edit in 48 against 0 in 48 read as -100 % [-100 %, -100 %], p < 0.0001).

    >>> _with_spread(0.0, 0.0004), _with_spread(0.01, 0.0004), _with_spread(None, 0.1)
    ((0.0004, 0.0004), (0.01, 0.0004), None)
    """
    if var_t is None or var_c is None:
        return None
    if var_t <= _ROUNDING < var_c:
        return var_c, var_c
    if var_c <= _ROUNDING < var_t:
        return var_t, var_t
    return var_t, var_c


def _fieller(t: float, var_t: float, c: float, var_c: float, z: float
             ) -> tuple[float, float] | tuple[None, None]:  # fmt: skip
    """The relative changes ``(theta - 1) sign(c)`` of the ratios ``theta`` with
    ``(t - theta c)^2 <= z^2 (var_t + theta^2 var_c)``: an interval when ``c^2 > z^2 var_c``,
    else (None, None), the set having no finite bounds."""
    a = c * c - z * z * var_c
    if a <= 0:
        return None, None
    b = t * c
    root = math.sqrt(max(b * b - a * (t * t - z * z * var_t), 0.0))
    low, high = (b - root) / a, (b + root) / a
    return (low - 1, high - 1) if c > 0 else (1 - high, 1 - low)


def sequential_change(t: float | None, var_t: float | None, c: float | None,
                      var_c: float | None, users: int, alpha: float = SEQUENTIAL_ALPHA,
                      tuning_users: int = SEQUENTIAL_TUNING_USERS) -> Change:  # fmt: skip
    """The relative change with an anytime-valid interval and p-value over ``users`` (both
    arms): valid at every refresh of the mart at once. The p-value is the sequence's for the
    difference ``t - c``; the interval is Fieller's (as in :func:`relative_change`) at the
    sequence's multiplier, so it holds the fixed-sample interval. Undefined (None) where the
    fixed-sample one is, and where the spread is rounding.

    >>> ch = sequential_change(0.55, 0.0001, 0.5, 0.0001, 5000)
    >>> round(ch.ci_low, 4), round(ch.ci_high, 4), ch.p_value < 0.05
    (0.0136, 0.1946, True)
    """
    start = _compared(t, var_t, c, var_c)
    if isinstance(start, Change):
        return start
    t, c, rel, var_t, var_c, sd = start
    if sd <= _ROUNDING * max(1.0, abs(c), abs(t)):
        return Change(c, t, rel, None, None)
    b = anytime_bound(Difference(t - c, sd * sd, users), alpha, tuning_users, "two")
    if b.high is None:
        return Change(c, t, rel, None, None)
    low, high = _fieller(t, var_t, c, var_c, (b.high - (t - c)) / sd)
    return Change(c, t, rel, low, high, b.p_value)


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


def chi2_survival(x: float, df: int) -> float:
    """``P(X >= x)`` for ``X`` chi-square with an integer ``df`` >= 1, in closed form.

    Even ``df``: ``exp(-x/2) sum_{k < df/2} (x/2)^k / k!``. Odd ``df``: ``2 (1 - Phi(sqrt x))``
    plus ``exp(-x/2) sum_{j=1}^{(df-1)/2} x^(j - 1/2) / (2^(j - 1/2) Gamma(j + 1/2))``. The terms
    are summed in log space, so that large ``x`` or ``df`` neither overflow nor lose the tail.

    >>> round(chi2_survival(3.841458820694124, 1), 6)  # the 95 % point of chi-square(1)
    0.05
    >>> round(chi2_survival(5.991464547107979, 2), 6)
    0.05
    >>> chi2_survival(0.0, 3)
    1.0
    """
    if df < 1:
        raise ValueError(f"df must be a positive integer, got {df}")
    if x <= 0:
        return 1.0
    half = x / 2.0
    if df % 2 == 0:
        terms = [k * math.log(half) - math.lgamma(k + 1) - half for k in range(df // 2)]
        total = 0.0
    else:
        terms = [(j - 0.5) * math.log(half) - math.lgamma(j + 0.5) - half
                 for j in range(1, (df - 1) // 2 + 1)]  # fmt: skip
        total = math.erfc(math.sqrt(half))
    total += sum(math.exp(t) for t in terms)
    return min(max(total, 0.0), 1.0)


@dataclass(frozen=True)
class SampleRatio:
    """The sample-ratio-mismatch check of one experiment."""

    observed: dict[str, int]  # arm -> units (users) seen in it
    expected_share: dict[str, float]  # arm -> configured share, summing to 1
    chi2: float
    df: int
    p_value: float
    alpha: float
    srm: bool  # p_value < alpha: the split is not what was configured


def sample_ratio_mismatch(observed: Mapping[str, int],
                          weights: Mapping[str, float] | None = None,
                          alpha: float = SRM_ALPHA) -> SampleRatio:  # fmt: skip
    """Pearson's chi-square of the units per arm against the configured ``weights`` (any
    positive numbers, normalised to shares; equal shares when None).

    >>> sample_ratio_mismatch({"control": 1000, "treatment": 1000}).srm
    False
    >>> check = sample_ratio_mismatch({"control": 1100, "treatment": 900})
    >>> round(check.chi2, 1), check.p_value < 1e-5, check.srm
    (20.0, True, True)
    >>> sample_ratio_mismatch({"parent": 905, "canary": 95}, {"parent": 90, "canary": 10}).srm
    False
    """
    arms = sorted(observed)
    if len(arms) < 2:
        raise ValueError(f"a split needs at least two arms, got {arms}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    weights = weights if weights is not None else {arm: 1.0 for arm in arms}
    if set(weights) != set(arms):
        raise ValueError(f"weights name arms {sorted(weights)}, the data has {arms}")
    if any(not w > 0 for w in weights.values()):
        raise ValueError(f"weights must be positive, got {dict(weights)}")
    total_weight = sum(weights.values())
    share = {arm: weights[arm] / total_weight for arm in arms}
    n = sum(observed.values())
    if n == 0:
        return SampleRatio(dict(observed), share, 0.0, len(arms) - 1, 1.0, alpha, False)
    chi2 = sum((observed[a] - n * share[a]) ** 2 / (n * share[a]) for a in arms)
    p = chi2_survival(chi2, len(arms) - 1)
    return SampleRatio({a: int(observed[a]) for a in arms}, share, chi2, len(arms) - 1, p,
                       alpha, p < alpha)  # fmt: skip
