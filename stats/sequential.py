"""Anytime-valid confidence sequences: intervals that may be looked at after every refresh.

A fixed-sample 95 % interval is right once. Looked at again each time data lands, and acted on
the first time it excludes the null, it errs far more often than 5 % (ten looks give about
20 %). A *confidence sequence* holds at every look at once: the chance that the truth falls
outside it at *any* look, however many, is at most ``alpha``.

The one used here is the asymptotic normal-mixture sequence (Howard, Ramdas, McAuliffe &
Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", 2021; Waudby-Smith
et al., "Time-uniform central limit theory", 2021), the one GrowthBook and Eppo ship. With an
estimate of variance ``V`` resting on ``n`` independent units (users), its half-width is
``c(n) sqrt(V)`` with, two-sided,

    c(n)^2 = 2 (1 + n rho^2) / (n rho^2) * log(sqrt(1 + n rho^2) / alpha)

and ``rho^2`` chosen so that the sequence is tightest at ``n = N*`` (``tuning_units``). One-sided
bounds mix over ``lambda >= 0`` only (a half-normal mixture), so their multiplier solves
``exp(u^2 / 2) Phi(u) = sqrt(1 + n rho^2) / (2 alpha)`` with ``c = u sqrt((1 + n rho^2) / (n
rho^2))``: slightly tighter than the two-sided one at ``alpha``. Each comes with its anytime-valid
p-value, ``min(1, 1 / M_n)`` of the mixture martingale ``M_n``: ``p <= alpha`` exactly when the
bound at ``alpha`` excludes the null.

The guarantee is asymptotic in the units (a central limit theorem over users), as a z-interval's
is; it holds for any number of looks, taken whenever data arrives.

When the estimate's variance is not positive, or fewer than two units carry it, nothing can be
said: the result is ``informative=False`` with the reason, never a bound (STYLE.md #15).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Side = Literal["two", "lower", "upper"]


def mixture_rho2(tuning_units: float, alpha: float) -> float:
    """The mixture's ``rho^2`` that makes the two-sided sequence tightest at ``tuning_units``
    (Howard et al. 2021, eq. (3.8) approximately; any positive value keeps the guarantee).

    >>> round(mixture_rho2(5000, 0.05), 8)
    0.00158723
    """
    if not tuning_units > 0 or not 0 < alpha < 1:
        raise ValueError(f"need tuning_units > 0 and 0 < alpha < 1, got {tuning_units}, {alpha}")
    a = -2 * math.log(alpha)
    return (a + math.log(a + 1)) / tuning_units


def _log_norm_cdf(u: float) -> float:
    value = 0.5 * math.erfc(-u / math.sqrt(2))
    return math.log(value) if value > 0 else -math.inf


def two_sided_multiplier(units: int, alpha: float, rho2: float) -> float:
    """``c(n)``: the two-sided half-width over the standard error at ``units``.

    >>> round(two_sided_multiplier(5000, 0.05, mixture_rho2(5000, 0.05)), 3)  # 1.96 fixed
    3.035
    """
    t = units * rho2
    return math.sqrt(2 * (1 + t) / t * math.log(math.sqrt(1 + t) / alpha))


def one_sided_multiplier(units: int, alpha: float, rho2: float) -> float:
    """The one-sided bound's multiplier (half-normal mixture), by bisection on ``u``.

    >>> rho2 = mixture_rho2(5000, 0.05)
    >>> round(one_sided_multiplier(5000, 0.05, rho2), 3)  # 1.645 fixed-sample
    2.768
    >>> one_sided_multiplier(5000, 0.05, rho2) < two_sided_multiplier(5000, 0.05, rho2)
    True
    """
    t = units * rho2
    target = math.log(math.sqrt(1 + t) / (2 * alpha))
    lo, hi = 0.0, 64.0  # exp(u^2/2) Phi(u) rises with u: at 0 it is 1/2 < the target
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid * mid / 2 + _log_norm_cdf(mid) < target:
            lo = mid
        else:
            hi = mid
    return hi * math.sqrt((1 + t) / t)


def two_sided_p(z_score: float, units: int, rho2: float) -> float:
    """Anytime-valid p-value of "no difference" for an estimate ``z_score`` standard errors
    away from it.

    >>> rho2 = mixture_rho2(5000, 0.05)
    >>> round(two_sided_p(two_sided_multiplier(5000, 0.05, rho2), 5000, rho2), 6)
    0.05
    """
    t = units * rho2
    log_m = -0.5 * math.log1p(t) + t * z_score * z_score / (2 * (1 + t))
    return min(1.0, math.exp(-log_m))


def one_sided_p(z_score: float, units: int, rho2: float) -> float:
    """Anytime-valid p-value of a one-sided null for an estimate ``z_score`` standard errors
    past it in the tested direction (negative: on the null's side).

    >>> rho2 = mixture_rho2(5000, 0.05)
    >>> round(one_sided_p(one_sided_multiplier(5000, 0.05, rho2), 5000, rho2), 6)
    0.05
    >>> one_sided_p(-3.0, 5000, rho2)
    1.0
    """
    t = units * rho2
    u = z_score * math.sqrt(t / (1 + t))
    log_m = math.log(2) - 0.5 * math.log1p(t) + u * u / 2 + _log_norm_cdf(u)
    return 1.0 if log_m == -math.inf else min(1.0, math.exp(-log_m))


@dataclass(frozen=True)
class Difference:
    """An estimate, its variance, and the number of independent units (users) behind it."""

    estimate: float | None
    variance: float | None
    units: int


@dataclass(frozen=True)
class AnytimeBound:
    """A confidence sequence's value at one look, or an explicit "uninformative".

    ``low``/``high`` are None on the side a one-sided bound leaves open; ``p_value`` is that of
    ``estimate`` against ``null`` (``side`` "lower": the null is ``theta <= null``; "upper":
    ``theta >= null``; "two": ``theta == null``)."""

    estimate: float | None
    low: float | None
    high: float | None
    p_value: float | None
    alpha: float
    side: Side
    null: float
    units: int
    informative: bool
    why: str | None = None


def anytime_bound(d: Difference, alpha: float, tuning_units: float, side: Side = "two",
                  null: float = 0.0) -> AnytimeBound:  # fmt: skip
    """The sequence at ``alpha`` for ``d``; uninformative when its variance is not positive.

    >>> b = anytime_bound(Difference(0.05, 0.0001, 5000), 0.05, 5000, "lower", -0.1)
    >>> round(b.low, 4), b.high, b.p_value < 1e-6, b.informative
    (0.0223, None, True, True)
    >>> anytime_bound(Difference(-1.0, None, 1), 0.05, 5000, "lower").why
    'variance undefined (fewer than two units or no data)'
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    why = None
    if d.estimate is None or d.variance is None or d.units < 2:
        why = "variance undefined (fewer than two units or no data)"
    elif not (math.isfinite(d.variance) and d.variance > 0):
        why = f"variance {d.variance:g} is not positive: every unit looks the same"
    if why is not None or d.estimate is None or d.variance is None:
        return AnytimeBound(d.estimate, None, None, None, alpha, side, null, d.units, False, why)
    rho2 = mixture_rho2(tuning_units, alpha)
    se = math.sqrt(d.variance)
    z = (d.estimate - null) / se
    if side == "two":
        c = two_sided_multiplier(d.units, alpha, rho2)
        low, high, p = d.estimate - c * se, d.estimate + c * se, two_sided_p(z, d.units, rho2)
    else:
        c = one_sided_multiplier(d.units, alpha, rho2)
        if side == "lower":
            low, high, p = d.estimate - c * se, None, one_sided_p(z, d.units, rho2)
        else:
            low, high, p = None, d.estimate + c * se, one_sided_p(-z, d.units, rho2)
    return AnytimeBound(d.estimate, low, high, p, alpha, side, null, d.units, True)
