"""The degrees of freedom of the gate's cluster-robust bound (``release.offpolicy_bound``): a
mean over users holding unequal shares of the interactions, its CR2 variance, and the t
quantile's degrees of freedom under independent interactions within a user (Bell-McCaffrey)
and under correlated ones (Imbens-Kolesar, at an upper bound of that correlation; the
former is ``stats.cluster_ratio.bell_mccaffrey_df``, shared with the monitors). Pure numpy.
"""

from __future__ import annotations

import numpy as np

from stats.fisher_f import f_quantile

RHO_CONFIDENCE = 0.95  # of the within-user correlation's upper bound the degrees of freedom use


def imbens_kolesar_df(share: np.ndarray, sizes: np.ndarray, rho: float) -> float:
    """The Satterthwaite degrees of freedom of the CR2 variance of a mean over users holding
    these shares (and counts) of the interactions, when a user's interactions correlate ``rho``
    (Imbens and Kolesar 2016): a user's error sum then varies as ``(1 - rho) n_g + rho n_g^2``,
    so at ``rho > 0`` heavy users weigh more than ``stats.cluster_ratio.bell_mccaffrey_df``
    (``rho = 0``) lets them, and the degrees of freedom are fewer. ``G - 1`` for ``G`` equal
    users at any ``rho``.

    The variance estimate is ``E^T A E`` over the users' error sums ``E`` with ``A = (I - 1h^T)
    D^-1 (I - h1^T)``, ``D = diag(1 - h)``; with ``Var E = diag(v)`` the degrees of freedom are
    ``tr(C)^2 / tr(C^2)``, ``C = V^1/2 A V^1/2``, a diagonal plus a rank-two matrix, so
    computed in O(users).

    >>> shares = np.array([0.5] + [0.05] * 10)  # 11 users, one with half the interactions
    >>> sizes = shares * 400
    >>> [round(imbens_kolesar_df(shares, sizes, rho), 2) for rho in (0.0, 0.1, 1.0)]
    [3.31, 1.48, 1.35]
    >>> round(imbens_kolesar_df(np.full(10, 0.1), np.full(10, 40.0), 1.0), 9)
    9.0
    """
    h = np.asarray(share, dtype=np.float64)
    n = np.asarray(sizes, dtype=np.float64)
    p = np.sqrt((1 - rho) * n + rho * n * n)  # sqrt(v)
    u = h / (1 - h)
    c = float(np.sum(h * u))
    delta = p * p / (1 - h)  # diagonal of V^1/2 D^-1 V^1/2
    q = p * u
    # C = diag(delta) + L, L = [p q] M [p q]^T with M = [[c, -1], [-1, 0]]
    trace_c = float(delta.sum() - 2 * np.sum(p * q) + c * np.sum(p * p))
    gram = np.array([[p @ p, p @ q], [q @ p, q @ q]])
    m_gram = np.array([[c, -1.0], [-1.0, 0.0]]) @ gram
    trace_c2 = float(np.sum(delta * delta) + 2 * np.sum(delta * (c * p * p - 2 * p * q))
                     + np.trace(m_gram @ m_gram))  # fmt: skip
    return min(max(trace_c * trace_c / trace_c2, 1.0), len(h) - 1.0)


def within_user_correlation_bound(sums: np.ndarray, squares: np.ndarray, sizes: np.ndarray,
                                  confidence: float = RHO_CONFIDENCE) -> float:  # fmt: skip
    """An upper confidence bound of the within-user (intraclass) correlation of the
    interactions' values, from each user's sum, sum of squares and count: the one-way ANOVA
    ratio ``F = MSB / MSW`` estimates ``theta = 1 + n0 rho / (1 - rho)`` times an F variable
    with ``G - 1`` and ``N - G`` degrees of freedom (``n0`` the users' effective size), so
    ``theta <= F / F_(1-confidence)(G - 1, N - G)`` at ``confidence``, and ``rho`` at most
    ``(theta - 1) / (theta - 1 + n0)`` (Searle's interval; for unequal users an approximation).
    1 when there is nothing to bound it with (one user, or no spread within users); never the
    estimate alone, which is biased low with few users.

    >>> rng = np.random.default_rng(0)
    >>> users = np.repeat(np.arange(20), 10)
    >>> values = rng.normal(size=20)[users] + rng.normal(size=200)  # rho = 0.5
    >>> def bound(v):
    ...     sums = np.bincount(users, weights=v)
    ...     return within_user_correlation_bound(sums, np.bincount(users, weights=v * v),
    ...                                          np.full(20, 10.0))
    >>> 0.5 < round(bound(values), 2) < 0.9, round(bound(rng.normal(size=200)), 2) < 0.2
    (True, True)
    """
    groups, total = len(sums), float(np.sum(sizes))
    if groups < 2 or total <= groups:
        return 1.0
    between = float(np.sum(sums * sums / sizes))
    within = (float(np.sum(squares)) - between) / (total - groups)
    spread = (between - float(np.sum(sums)) ** 2 / total) / (groups - 1)
    if not within > 0:
        return 1.0
    n0 = (total - float(np.sum(sizes * sizes)) / total) / (groups - 1)
    theta = (spread / within) / f_quantile(1 - confidence, groups - 1, total - groups)
    return float(min(1.0, max(0.0, (theta - 1) / (theta - 1 + n0))))
