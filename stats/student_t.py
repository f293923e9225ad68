"""Student's t distribution for any real number of degrees of freedom (>= 1 here), in plain
Python: the gate's small-sample bound (``release.offpolicy_bound``) takes its quantile at the
Bell-McCaffrey degrees of freedom, which are rarely an integer, and stays free of scipy.

The upper tail is an incomplete beta function, ``P(T > t) = I_x(df / 2, 1 / 2) / 2`` with
``x = df / (df + t^2)`` (DLMF 8.17 and 26.7), evaluated by its continued fraction (DLMF
8.17.22, modified Lentz); the quantile inverts it by bisection, which is slow next to Newton but
cannot fail, and costs well under a millisecond.
"""

from __future__ import annotations

import math

_EPS = 1e-15
_TINY = 1e-300


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of ``I_x(a, b)``, fast for ``x < (a + 1) / (a + b + 2)``."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)`` for ``a, b > 0``.

    >>> round(incomplete_beta(0.5, 2.0, 2.0), 12), round(incomplete_beta(0.2, 1.0, 1.0), 12)
    (0.5, 0.2)
    """
    if not (a > 0 and b > 0 and 0 <= x <= 1):
        raise ValueError(f"need a, b > 0 and x in [0, 1], got {a}, {b}, {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))  # fmt: skip
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b


def t_upper_tail(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom.

    >>> round(t_upper_tail(12.706204736, 1.0), 6), round(t_upper_tail(0.0, 3.5), 6)
    (0.025, 0.5)
    """
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df}")
    tail = 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5)
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, ``p`` in [0.5, 1).

    >>> [round(t_quantile(p, df), 4) for p, df in ((0.975, 1), (0.95, 4), (0.975, 10))]
    [12.7062, 2.1318, 2.2281]
    >>> round(t_quantile(0.95, 1e9), 4)  # the normal's
    1.6449
    """
    if not 0.5 <= p < 1 or not df > 0:
        raise ValueError(f"need p in [0.5, 1) and df > 0, got {p}, {df}")
    tail = 1.0 - p
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > tail:
        low, high = high, 2 * high
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_upper_tail(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * max(1.0, high):
            break
    return high
