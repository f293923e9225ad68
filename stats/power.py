"""The size of a two-arm test of a proportion, fixed in advance: how many runs each arm needs
for the test of "no change" to reject with a given power when the rate truly moves from ``p0``
to ``p1``.

The textbook normal approximation for two independent proportions, without continuity
correction (Fleiss, Levin & Paik, *Statistical Methods for Rates and Proportions*, 3rd ed.,
eq. 4.14; Chow, Shao & Wang, *Sample Size Calculations in Clinical Research*, 4.2):

    n = (z_{1-a/2} sqrt(2 p(1-p)) + z_{1-b} sqrt(p0(1-p0) + p1(1-p1)))^2 / (p1 - p0)^2

with ``p`` the two rates' mean, rounded up. It is the size of the plain difference test that
the A/B report runs (``warehouse.ab``), each run one Bernoulli outcome.
"""

from __future__ import annotations

import math
from statistics import NormalDist


def runs_per_arm(p0: float, p1: float, alpha: float = 0.05, power: float = 0.95) -> int:
    """Runs each arm needs to tell ``p1`` from ``p0`` (two-sided level ``alpha``) with
    probability ``power``.

    >>> runs_per_arm(0.5, 0.6, power=0.8)  # the textbook 387.3, rounded up
    388
    """
    if not (0 < p0 < 1 and 0 < p1 < 1) or p0 == p1:
        raise ValueError("p0 and p1 are two different rates strictly between 0 and 1")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("alpha and power are strictly between 0 and 1")
    z = NormalDist().inv_cdf
    mean = (p0 + p1) / 2
    spread = z(1 - alpha / 2) * math.sqrt(2 * mean * (1 - mean)) + z(power) * math.sqrt(
        p0 * (1 - p0) + p1 * (1 - p1)
    )
    return math.ceil(spread**2 / (p1 - p0) ** 2 - 1e-9)
