"""The gate per organisation keeps its error rate for each organisation, not only on average:
a small organisation whose candidate is truly worse, among large ones it truly suits, is
promoted no more often than the stated level when each organisation is judged on its own
evidence, and almost always when one decision is taken on everyone's; where every candidate is
truly equal, each organisation's false promotions stay at the level."""

from __future__ import annotations

import math

from tests.release.org_worlds import (
    MIXED,
    NULL,
    SMALL,
    SMALL_NULL,
    accumulated_rates,
    promotion_rates,
)

ALPHA = 0.05  # the estimate's default level, 0.95 one-sided
TRIALS = 400


def _limit(trials: int) -> float:
    return ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / trials)


def test_a_small_organisations_worse_candidate_is_not_carried_by_the_large_ones() -> None:
    own = promotion_rates(MIXED, TRIALS, seed=11)
    small = [o.name for o in MIXED].index("small")
    assert MIXED[small].true_gain < 0 < min(o.true_gain for o in MIXED if o.name != "small")
    assert own[small] <= _limit(TRIALS), own
    assert min(r for i, r in enumerate(own) if i != small) >= 0.5, own  # the large ones gain
    pooled = promotion_rates(MIXED, 100, seed=11, pooled=True)
    assert pooled[small] >= 0.5  # what one decision for all would do to it


def test_every_organisations_false_promotions_stay_at_the_level() -> None:
    rates = promotion_rates(NULL, TRIALS, seed=12)
    assert all(abs(o.true_gain) < 1e-12 for o in NULL)
    assert max(rates) <= _limit(TRIALS), rates
    # the expected number of false promotions across organisations: at most one level each
    assert sum(rates) <= len(NULL) * _limit(TRIALS)


def test_a_small_organisation_gains_power_by_accumulating_its_evidence_at_its_level() -> None:
    """Eight looks at a 20-user organisation, each reading every round's held-out users so far:
    a real gain is promoted far more often by the eighth look than at the first, and where the
    candidate is truly equal the course's false promotions stay at the level, because each look
    spends its share of alpha (the full level at every look: 0.112 by the eighth, measured)."""
    power = accumulated_rates(SMALL, 8, 200, seed=13)
    assert power[7] >= power[0] + 0.2, power
    false = accumulated_rates(SMALL_NULL, 8, 800, seed=14)
    assert false[7] <= _limit(800), false
