"""A line's rounds where the truth is known, for the gate on earlier checkpoints' evidence
(``tests/release/test_offpolicy_parent.py`` and ``bench/earlier_evidence.py`` draw from them).

The lineage: a grandparent served round 1 (completion types at 15/70/15 %), the parent it
promoted served round 2 (40/45/15 %), and users like type 0 more (0.8 against 0.3): the parent
is truly better than the grandparent. The same users come back in round 2 (one hold-out hash),
with Zipf-like activity and tastes of their own. A candidate that moves the parent's mass
between the two types users like equally is truly no better than its parent: every promotion of
it is a false one. Read naively, round 1's rewards stand for the parent's value, and the
candidate is credited with the parent's own gain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from release.offpolicy_bound import CENTRED_METHOD, Estimate, estimate_gain
from tests.release.worlds import Draw, World, promoted

GRANDPARENT, PARENT = (0.15, 0.70, 0.15), (0.40, 0.45, 0.15)
EQUAL = (0.40, 0.25, 0.35)  # the parent's value exactly: type 1 and type 2 pay alike
# a milder lineage for power: the parent one step from the grandparent, a candidate worth +0.05
NEAR_GRANDPARENT, NEAR_PARENT, BETTER = (0.3, 0.5, 0.2), (0.4, 0.4, 0.2), (0.5, 0.3, 0.2)


@dataclass(frozen=True)
class Lineage:
    grandparent: tuple[float, ...]
    parent: tuple[float, ...]
    candidate: tuple[float, ...]
    users: tuple[int, int] = (20, 30)
    interactions: int = 200  # a round's held-out interactions
    taste_sd: float = 0.2
    zipf: float = 1.1
    scored: tuple[float, ...] | None = None  # each type's chance of an outcome (None: always)

    def world(self, served: tuple[float, ...]) -> World:
        return World("lineage", behaviour=served, candidate=self.candidate,
                     reward=(0.8, 0.3, 0.3), taste_sd=(0.0, self.taste_sd, self.taste_sd),
                     users=self.users, interactions=self.interactions, zipf=self.zipf,
                     scored=self.scored)  # fmt: skip

    def true_gain(self) -> float:
        return self.world(self.parent).true_gain()

    def rounds(self, rng: np.random.Generator) -> tuple[Draw, Draw, np.ndarray]:
        """Round 1 (the grandparent's), round 2 (the parent's) from the same users, and round
        1's parent log-weights."""
        old, (new,), parent_log_w = self.course(rng, 1)
        return old, new, parent_log_w

    def course(self, rng: np.random.Generator,
               looks: int) -> tuple[Draw, list[Draw], np.ndarray]:  # fmt: skip
        """Round 1 (the grandparent's), ``looks`` rounds of the parent's from the same users,
        and round 1's parent log-weights."""
        old_world = self.world(self.grandparent)
        population = old_world.population(rng)
        old = old_world.draw(rng, population)
        news = [self.world(self.parent).draw(rng, population) for _ in range(looks)]
        parent_log_w = (old.scored_by(self.parent).candidate_logprobs
                        - old.behaviour_logprobs).sum(1)  # fmt: skip
        return old, news, parent_log_w


def log_weights(draw: Draw) -> np.ndarray:
    return (draw.candidate_logprobs - draw.behaviour_logprobs).sum(1)


def centred_estimate(draw: Draw, parent_log_w: np.ndarray | None = None) -> Estimate:
    """The gate's centred estimate on ``draw`` (coins: rewards in [0, 1])."""
    rewards = [None if np.isnan(r) else float(r) for r in draw.rewards]  # NaN: censored
    return estimate_gain(draw.users, rewards, log_weights(draw),
                         reward_min=0.0, reward_max=1.0, method=CENTRED_METHOD,
                         parent_log_weights=parent_log_w)  # fmt: skip


def decisions(lineage: Lineage, trials: int, seed: int) -> dict[str, float]:
    """The share of ``trials`` promoted on the parent's round alone, on both rounds with both
    arms off-policy, and on both rounds with round 1's rewards read as the parent's."""
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(("parent's round", "both arms", "naive"), 0)
    for _ in range(trials):
        old, new, parent_log_w = lineage.rounds(rng)
        both = old + new
        counts["parent's round"] += promoted(centred_estimate(new))
        parent = np.concatenate([parent_log_w, np.zeros(len(new.users))])
        counts["both arms"] += promoted(centred_estimate(both, parent))
        counts["naive"] += promoted(centred_estimate(both))
    return {name: count / trials for name, count in counts.items()}
