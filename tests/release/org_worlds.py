"""Organisations of unequal size judged by the gate, where the truth is known: each organisation's
users are a world of ``tests/release/worlds.py`` (its own population and tastes), and one
candidate is judged for every organisation. Decided per organisation, each organisation's
decision reads only its own users' evidence (what `rtrl train --org` does); pooled, one decision
on everyone's evidence is taken for all (what a shared gate would do), so a small organisation's
truly worse candidate rides on the large ones' gain. The tests in this folder and
``bench/org_gate.py`` draw from the same worlds.

Every organisation is served the same policy (completion type 0 at 30 %), and the candidate does
type 0 twice as often (60 %). Rewards are coins of chance 0.4 for both types, plus each user's
taste for type 0 around the organisation's mean ``taste``: the true gain is ``0.3 * taste``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from release.gate import attempt_level
from tests.release.worlds import Draw, World, promoted


@dataclass(frozen=True)
class Org:
    name: str
    users: int  # held-out users of a round
    interactions: int  # held-out interactions of a round
    taste: float  # the organisation's mean taste for what the candidate does more of

    def world(self) -> World:
        return World(f"{self.name}", behaviour=(0.3, 0.7), candidate=(0.6, 0.4),
                     reward=(0.4, 0.4), taste_mean=(self.taste, 0.0), taste_sd=(0.15, 0.0),
                     users=(self.users, self.users), interactions=self.interactions,
                     zipf=0.8)  # fmt: skip

    @property
    def true_gain(self) -> float:
        return self.world().true_gain()


# two large organisations the candidate truly suits, a small one it truly does not
MIXED = (Org("large A", 240, 960, 0.2), Org("large B", 120, 480, 0.2), Org("small", 20, 80, -0.2))
# every candidate truly equal for every organisation: each promotion is a false one
NULL = (Org("large A", 240, 960, 0.0), Org("mid B", 120, 480, 0.0), Org("mid C", 60, 240, 0.0),
        Org("small D", 20, 80, 0.0))  # fmt: skip


def _pooled(draws: list[Draw]) -> Draw:
    """Everyone's evidence as one (organisations', or rounds' of new users): each draw's users
    kept apart (ids offset)."""
    offset, parts = 0, []
    for d in draws:
        parts.append(Draw(d.users + offset, d.rewards, d.behaviour_logprobs,
                          d.candidate_logprobs, d.kinds))  # fmt: skip
        offset += int(d.users.max()) + 1
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def decisions(orgs: tuple[Org, ...], rng: np.random.Generator, trial: int,
              pooled: bool = False) -> list[bool]:  # fmt: skip
    """One round's decision for each organisation: on its own evidence, or (``pooled``) one
    decision on everyone's taken for all."""
    draws = []
    for org in orgs:
        world = org.world()
        draws.append(world.draw(rng, world.population(rng)))
    if pooled:
        return [promoted(_pooled(draws).estimate(resamples=0, seed=trial))] * len(orgs)
    return [promoted(d.estimate(resamples=0, seed=trial)) for d in draws]


def promotion_rates(orgs: tuple[Org, ...], trials: int, seed: int,
                    pooled: bool = False) -> list[float]:  # fmt: skip
    """Each organisation's share of ``trials`` rounds whose candidate it is served."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(orgs))
    for trial in range(trials):
        counts += decisions(orgs, rng, trial, pooled)
    return list(counts / trials)


SMALL = Org("small", 20, 80, 0.2)  # a small organisation a candidate truly suits (gain +0.06)
SMALL_NULL = Org("small", 20, 80, 0.0)  # ... and one where it is truly equal


def accumulated_rates(org: Org, looks: int, trials: int, seed: int,
                      spend: bool = True) -> list[float]:  # fmt: skip
    """The share of ``trials`` courses in which ``org``'s candidate is promoted by look k, for k
    = 1 .. ``looks``. Look k reads the held-out users of k rounds (new users each round, as the
    served checkpoint's batches add up), at the k-th attempt's level
    (``release.gate.attempt_level``; ``spend`` False: the full level at every look, what the
    gate must not do); a course ends at its first promotion."""
    rng = np.random.default_rng(seed)
    by_look = np.zeros(looks)
    world = org.world()
    for trial in range(trials):
        rounds: list[Draw] = []
        for k in range(1, looks + 1):
            rounds.append(world.draw(rng, world.population(rng)))
            level = attempt_level(0.95, k) if spend else 0.95
            if promoted(_pooled(rounds).estimate(resamples=0, seed=trial, level=level)):
                by_look[k - 1 :] += 1
                break
    return list(by_look / trials)
