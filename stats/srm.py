"""A sample-ratio-mismatch test that may be run at every look: the split's p-value stays valid
however often it is computed (Lindon & Malek, "Anytime-valid inference for multinomial count
data", 2022).

Pearson's chi-square is right once. Re-run at every look of a canary on a split that is
correct, it crossed p < 0.001 in 0.8 % of canaries at 20 looks, 2.5 % at 200 and 3.8 % at 2,000
(the issue's review): good canaries rolled back for a split that was fine. Here the users who
landed on the canary arm, ``x`` of ``n``, are scored by a Bayes factor of a Beta mixture over
the canary's share against the configured share ``s``:

    BF_n = B(a + x, b + n - x) / B(a, b) / (s^x (1 - s)^(n - x)),   a = c s, b = c (1 - s)

which under a correct split is a nonnegative martingale with mean 1, so by Ville's inequality
the chance that it ever reaches ``1 / alpha``, at any of any number of looks, is at most
``alpha``. The p-value is ``min(1, 1 / BF_n)``: a look that finds it under ``alpha`` may stop
the canary, and no sequence of looks errs more often than that. The prior's concentration ``c``
(100: the share known to within about a tenth of itself) sets which mismatches it finds
soonest; any ``c`` keeps the guarantee.

Users count once, at their first assignment (the arms' user counts), so the draws are the
users, independent given a correct split.
"""

from __future__ import annotations

import math

CONCENTRATION = 100.0


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def sequential_srm_p(control: int, treatment: int, share: float,
                     concentration: float = CONCENTRATION) -> float:  # fmt: skip
    """The anytime-valid p-value of "``treatment`` of the users landed on an arm that gets
    ``share`` of them".

    >>> sequential_srm_p(1600, 400, 0.2)  # exactly the split
    1.0
    >>> sequential_srm_p(1600, 520, 0.2) < 1e-4  # 24.5 % on a 20 % arm
    True
    """
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share!r}")
    if control < 0 or treatment < 0:
        raise ValueError("user counts are never negative")
    n, x = control + treatment, treatment
    a, b = share * concentration, (1 - share) * concentration
    log_bf = (_log_beta(a + x, b + n - x) - _log_beta(a, b)
              - x * math.log(share) - (n - x) * math.log1p(-share))  # fmt: skip
    return min(1.0, math.exp(-log_bf)) if log_bf > 0 else 1.0
