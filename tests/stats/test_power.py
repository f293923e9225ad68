"""The A/B size rule against textbook values."""

from __future__ import annotations

import pytest

from stats.power import runs_per_arm


@pytest.mark.parametrize(
    ("p0", "p1", "power", "want"),
    [
        (0.5, 0.6, 0.8, 388),  # Fleiss et al.: 387.3 per group, two-sided 5 %
        (0.6, 0.5, 0.8, 388),  # symmetric in the direction of the change
        (0.65, 0.85, 0.8, 73),  # 72.4 by hand, rounded up
        (0.5, 0.6, 0.9, 519),
    ],
)
def test_runs_per_arm_matches_the_textbook(p0: float, p1: float, power: float, want: int) -> None:
    assert runs_per_arm(p0, p1, power=power) == want


def test_more_power_or_a_smaller_effect_needs_more_runs() -> None:
    assert runs_per_arm(0.3, 0.4, power=0.95) > runs_per_arm(0.3, 0.4, power=0.8)
    assert runs_per_arm(0.3, 0.35) > runs_per_arm(0.3, 0.4)


@pytest.mark.parametrize(("p0", "p1"), [(0.3, 0.3), (0.0, 0.2), (0.4, 1.0)])
def test_rates_that_cannot_be_told_apart_are_refused(p0: float, p1: float) -> None:
    with pytest.raises(ValueError):
        runs_per_arm(p0, p1)
