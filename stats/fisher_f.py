"""Fisher's F distribution's quantile, in plain Python like ``stats.student_t`` (whose
incomplete beta it uses): the gate's upper bound of the within-user correlation
(``release.cluster_df.within_user_correlation_bound``) needs a lower quantile of F at
degrees of freedom that vary with each decision's users, and stays free of scipy.

``P(F <= f) = I_x(d1 / 2, d2 / 2)`` with ``x = d1 f / (d1 f + d2)`` (DLMF 26.5); the quantile
inverts it by bisection on ``x`` in (0, 1), which cannot fail.
"""

from __future__ import annotations

from stats.student_t import incomplete_beta


def f_cdf(f: float, d1: float, d2: float) -> float:
    """``P(F <= f)`` for F with ``d1`` and ``d2`` degrees of freedom.

    >>> round(f_cdf(1.0, 4.0, 4.0), 12)
    0.5
    """
    if not (d1 > 0 and d2 > 0):
        raise ValueError(f"degrees of freedom must be > 0, got {d1}, {d2}")
    if f <= 0:
        return 0.0
    return incomplete_beta(d1 * f / (d1 * f + d2), d1 / 2, d2 / 2)


def f_quantile(p: float, d1: float, d2: float) -> float:
    """The ``p`` quantile of F with ``d1`` and ``d2`` degrees of freedom, ``p`` in (0, 1).

    >>> [round(f_quantile(p, d1, d2), 4) for p, d1, d2 in ((0.05, 9, 300), (0.95, 3, 10))]
    [0.3672, 3.7083]
    """
    if not (0 < p < 1 and d1 > 0 and d2 > 0):
        raise ValueError(f"need p in (0, 1) and degrees of freedom > 0, got {p}, {d1}, {d2}")
    a, b = d1 / 2, d2 / 2
    low, high = 0.0, 1.0  # over x = d1 f / (d1 f + d2), monotone in f
    for _ in range(200):
        mid = 0.5 * (low + high)
        if incomplete_beta(mid, a, b) < p:
            low = mid
        else:
            high = mid
        if high - low <= 1e-15:
            break
    x = 0.5 * (low + high)
    return d2 * x / (d1 * (1 - x))
