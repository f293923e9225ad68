"""A one-sided test of a move in a ratio of sums between two independent samples of users, with
the users as the unit: the behaviour monitors' decision (``rewards.monitors``).

Each side is ``G`` users, user ``g`` contributing ``y_g`` to the numerator and ``n_g`` to the
denominator (a rate over interactions: ``y_g`` interactions with the behaviour out of the user's
``n_g``; calls per interaction: the user's calls over their interactions). The ratio is
``r = sum y / sum n``, and its cluster-robust variance, CR2 (each user's residual scaled by their
leverage ``h_g = n_g / sum n``),

    V = sum_g (y_g - r n_g)^2 / (1 - h_g) / (sum n)^2

counts a user's interactions together, so that a user with many interactions who behaves alike
in all of them weighs as the one person they are. Treating each interaction as independent
underestimates the spread when a user's interactions correlate, and the test then alarms more
often than its stated level (tests/rewards/test_monitor_decision.py measures both).

The statistic ``(r_1 - r_0) / sqrt(V_0 + V_1)`` is read against Student's t at the
Satterthwaite combination of each side's degrees of freedom: the smaller of Bell-McCaffrey's
(``G - 1`` for equal users, fewer where a few users hold most interactions) and that of users
whose interactions are all alike (``alike_df``), which keeps the level in thin arms and with
heavy users, where CR1 at ``G - 1`` alarmed 8 % of the time at a stated 5 % (eight users a side,
geometric sizes of mean 6), and Bell-McCaffrey's alone 8 % with heavy-tailed users of their own
tastes (``bench/monitor_calibration.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from stats.student_t import t_quantile, t_upper_tail


@dataclass(frozen=True)
class ClusterRatio:
    """A ratio of sums over users and its cluster-robust variance."""

    value: float
    variance: float
    users: int
    total: float  # the denominator's sum (interactions, or sub-agents)
    df: float  # of the variance: Bell-McCaffrey's over the users' shares


def cluster_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> ClusterRatio:
    """The ratio ``sum y / sum n`` and its CR2 variance over the users (see the module), at the
    smaller of two working models' degrees of freedom (``alike_df``).

    >>> r = cluster_ratio([1, 1, 0, 0], [1, 1, 1, 1])
    >>> r.value, round(r.variance, 6), r.users  # p (1 - p) / (n - 1) for one each
    (0.5, 0.083333, 4)
    >>> cluster_ratio([2, 0], [2, 2]).variance  # the same four, two users alike within
    0.25
    """
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("one numerator and one denominator per user, at least one user")
    total = float(sum(denominators))
    if total <= 0:
        raise ValueError("the denominators sum to 0: no ratio")
    value = float(sum(numerators)) / total
    users = len(numerators)
    if users < 2:
        return ClusterRatio(value, math.inf, users, total, 0.0)
    y, n = np.asarray(numerators, dtype=np.float64), np.asarray(denominators, dtype=np.float64)
    share = n / total
    if share.max() >= 1:  # one user holds everything: no spread between users to read
        return ClusterRatio(value, math.inf, users, total, 0.0)
    spread = float(np.sum((y - value * n) ** 2 / (1 - share)))
    df = min(bell_mccaffrey_df(share), alike_df(share))
    return ClusterRatio(value, spread / total**2, users, total, df)


def bell_mccaffrey_df(share: np.ndarray) -> float:
    """The Bell-McCaffrey degrees of freedom of a mean over users holding these shares of the
    interactions (``(tr B)^2 / tr(B^2)``, ``tr B = 1``, with ``B`` as ``release.cluster_df``
    derives it): ``G - 1``
    for ``G`` equal users, about 1 when one user holds nearly everything.

    >>> equal, two = np.full(10, 0.1), np.array([0.9, 0.1])
    >>> round(bell_mccaffrey_df(equal), 9), round(bell_mccaffrey_df(two), 9)
    (9.0, 1.0)
    >>> round(bell_mccaffrey_df(np.array([0.5] + [0.05] * 10)), 2)  # 11 users, one with half
    3.31
    """
    h = np.asarray(share, dtype=np.float64)
    ratio = h * h / (1 - h)
    trace_b2 = float(np.sum(h * h) + np.sum(ratio) ** 2 - np.sum(ratio * ratio))
    return 1.0 / trace_b2


def alike_df(share: np.ndarray) -> float:
    """The degrees of freedom of the variance when a user's interactions are all alike (a user's
    residual spreads in proportion to their interactions, ``n_g``, not ``sqrt(n_g)``):
    Satterthwaite's ``(sum h^2)^2 / sum h^4`` over the users' shares ``h``.

    ``bell_mccaffrey_df`` reads the users' residuals as sums of independent interactions, which
    is right when users are alike and too generous when a few heavy users with tastes of their
    own carry the variance: with Lomax-sized users (shape 1.3) and per-user rates the one-sided
    test alarmed 7 to 8 % at a stated 5 % (``bench/monitor_calibration.py``). The smaller of
    the two holds under both; with equal users this one is ``G`` and Bell-McCaffrey's ``G - 1``
    rules.

    >>> round(alike_df(np.full(10, 0.1)), 9)
    10.0
    >>> round(alike_df(np.array([0.5] + [0.05] * 10)), 2)  # 11 users, one with half: not 3.31
    1.21
    """
    h2 = np.asarray(share, dtype=np.float64) ** 2
    return float(np.sum(h2) ** 2 / np.sum(h2 * h2))


@dataclass(frozen=True)
class MoveTest:
    """A one-sided test that the second sample's ratio moved the given way from the first's."""

    difference: float  # second - first
    standard_error: float
    statistic: float  # the difference in the tested direction, in standard errors
    df: float
    p_value: float


def one_sided_move(first: ClusterRatio, second: ClusterRatio, direction: int) -> MoveTest:
    """The p-value of "no move ``direction``" (+1: up, -1: down) from ``first`` to ``second``.

    With no spread on either side the difference is exact: p is 0 for a move the tested way,
    else 1.

    >>> a, b = cluster_ratio([1] * 30 + [0] * 70, [1] * 100), cluster_ratio([1] * 10 + [0] * 90,
    ...                                                                     [1] * 100)
    >>> t = one_sided_move(a, b, -1)
    >>> round(t.statistic, 2), round(t.df, 1), round(t.p_value, 4)
    (3.63, 170.7, 0.0002)
    >>> one_sided_move(a, b, +1).p_value > 0.99
    True
    """
    difference = second.value - first.value
    variance = first.variance + second.variance
    if variance == 0:
        moved = direction * difference > 0
        return MoveTest(difference, 0.0, math.copysign(math.inf, direction * difference) if
                        difference else 0.0, math.inf, 0.0 if moved else 1.0)  # fmt: skip
    if math.isinf(variance):
        return MoveTest(difference, math.inf, 0.0, 1.0, 1.0)
    standard_error = math.sqrt(variance)
    statistic = direction * difference / standard_error
    df = satterthwaite_df(first, second)
    return MoveTest(difference, standard_error, statistic, df, t_upper_tail(statistic, df))


def satterthwaite_df(first: ClusterRatio, second: ClusterRatio) -> float:
    """Degrees of freedom of ``V_0 + V_1``: ``(V_0 + V_1)^2 / sum(V_i^2 / df_i)``."""
    parts = [(s.variance, s.df) for s in (first, second) if s.variance > 0]
    denominator = sum(v * v / d for v, d in parts)
    return (sum(v for v, _ in parts)) ** 2 / denominator if denominator > 0 else math.inf


def alarm_sample(threshold: float, move: float, unit_spread: float, alpha: float,
                 power: float, df: float = math.inf) -> int:  # fmt: skip
    """Units a side for an alarm that needs both a one-sided test at ``alpha`` *and* an observed
    move past ``threshold`` to fire with probability ``power`` when the true move is ``move``
    (above the threshold: at the threshold itself the observed move falls short half the time).

    With the standard error ``s = unit_spread / sqrt(n)`` of the difference (``unit_spread^2``:
    the two sides' variances of one unit, summed) and the estimate normal around ``move``, the
    alarm fires when the estimate passes ``max(threshold, z_alpha s)``: probability ``power``
    needs ``s <= min((move - threshold) / z_power, move / (z_alpha + z_power))``.

    With ``df`` finite (few users, or a few heavy users holding most of the traffic) the
    quantiles are Student's t at ``df`` rather than the normal's: the test reads its statistic
    against t, and sized on the normal's a sample called large enough saw the sized move with
    probability 0.5 to 0.6, not 0.8, among heavy-tailed users (``bench/monitor_calibration.py``).

    >>> alarm_sample(0.08, 0.12, 0.7, 0.05, 0.8)  # 0.4 -> 0.28, a threshold of 0.08
    217
    >>> alarm_sample(0.08, 0.12, 0.7, 0.05, 0.8, df=5.0)  # five degrees of freedom
    294
    """
    if not move > threshold >= 0:
        raise ValueError(f"the true move {move} must be above the threshold {threshold} >= 0")
    if math.isinf(df):
        normal = NormalDist()
        z_alpha, z_power = normal.inv_cdf(1 - alpha), normal.inv_cdf(power)
    else:
        z_alpha = t_quantile(1 - alpha, df)
        z_power = t_quantile(power, df) if power >= 0.5 else -t_quantile(1 - power, df)
    largest = move / (z_alpha + z_power)
    if z_power > 0:
        largest = min(largest, (move - threshold) / z_power)
    return max(1, math.ceil((unit_spread / largest) ** 2))
