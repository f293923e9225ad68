"""Multiple comparisons: Holm's step-down adjustment, and alpha spent over repeated looks.

Five metrics each tested at 5 % raise a false alarm on at least one of them about 23 % of the
time when nothing changed. Holm (1979) keeps that family-wise rate at ``alpha`` for any
dependence between the tests, and rejects at least what Bonferroni rejects. The adjusted
p-value is compared with ``alpha`` directly. It also holds across looks when the p-values are
anytime-valid (``stats.sequential``): every step compares with ``alpha / m'`` for some ``m'`` no
larger than the number of true nulls, and each of those stays below that at every look with
probability ``1 - alpha / m'``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values, in the order given. A None (a test that could not be done)
    stays None and is not counted among the hypotheses: it can reject nothing.

    >>> holm([0.01, 0.04, 0.03, None])
    [0.03, 0.06, 0.06, None]
    >>> holm([0.5, 0.9])
    [1.0, 1.0]
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def look_alpha(alpha: float, look: int) -> float:
    """The level of the ``look``-th look (1-based) at one comparison whose data keep growing,
    when ``alpha`` is the chance of a false rejection at *any* look: alpha spent as
    ``alpha * 6 / (pi^2 k^2)``, which sums to at most ``alpha`` over any number of looks (the
    union bound needs nothing about how the looks' data overlap; ``release.gate.attempt_level``
    spends the gate's alpha over attempts the same way). Looked at five times at ``alpha`` each
    as users arrive, the monitors alarmed on a null checkpoint at some look 12 % of the time at
    a stated 5 % (``bench/monitor_calibration.py``).

    >>> round(look_alpha(0.05, 1), 4), round(look_alpha(0.05, 2), 4)
    (0.0304, 0.0076)
    """
    if not isinstance(look, int) or look < 1:
        raise ValueError(f"look must be an integer >= 1, got {look!r}")
    return alpha * 6 / (math.pi**2 * look**2)
