"""The canary's error rates as a simulation study (STYLE.md #16): worlds where the truth is
known, many seeded trials each, the canary looked at as data lands, and how often it ends in
each verdict. ``tests/release/test_canary_calibration.py`` holds the rates to their nominal
levels; ``bench/canary_calibration.py`` prints them.

A world: ``users`` users, each on the canary with probability ``percent`` %, arriving evenly
over ``looks`` looks (a look sees every user arrived so far, with all their interactions).
A user has ``1 + Poisson(interactions - 1)`` interactions; their own taste ``effect`` (normal,
sd ``taste_sd``, or for a ``bimodal`` canary one of two values) plus per-interaction noise
(sd ``noise_sd``) is their reward; each interaction is censored (unscored) with probability
``censored`` and makes an invalid tool call with probability ``invalid``. The canary's mean
taste is the parent's plus ``delta``, so ``delta`` is exactly the difference of per-user means
the canary judges. The last look is past the deadline.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from release.canary import REWARD, Arm, CanaryConfig, CanaryVerdict, judge
from rewards.monitors import MonitorThresholds
from warehouse.ab import RatioSums


@dataclass(frozen=True)
class World:
    users: int = 2000
    percent: float = 10.0
    looks: int = 20
    delta: float = 0.0  # canary - parent, per-user mean reward
    interactions: float = 4.0  # mean per user
    taste_sd: float = 0.3
    noise_sd: float = 0.8
    censored: tuple[float, float] = (0.05, 0.05)  # parent, canary
    invalid: tuple[float, float] = (0.1, 0.1)
    bimodal: tuple[float, float, float] | None = None  # canary taste: (share, high, low)
    canary_users: int | None = None  # a fixed number on the canary, all in the first look


@dataclass(frozen=True)
class Outcome:
    verdict: str  # the final one: rollout, rollback or wait (never decided)
    look: int
    reasons: tuple[str, ...]
    rolled_out_ever: bool


def _arm(effect: np.ndarray, k: np.ndarray, censored: np.ndarray, invalid: np.ndarray,
         noise: np.ndarray) -> Arm:  # fmt: skip
    """The same figures as ``release.canary.arm_of`` over these users, computed with numpy."""
    scored = k - censored
    has = scored > 0
    means = (effect + noise / np.sqrt(np.maximum(scored, 1)))[has]

    def sums(x: np.ndarray, y: np.ndarray) -> RatioSums:
        return RatioSums(len(x), float(x.sum()), float(y.sum()), float((x * x).sum()),
                         float((y * y).sum()), float((x * y).sum()))  # fmt: skip

    kf = k.astype(float)
    metrics = {
        REWARD: sums(np.ones(len(means)), means),
        "censored_share": sums(kf, censored.astype(float)),
        "invalid_tool_call_rate": sums(kf, invalid.astype(float)),
    }
    return Arm(len(k), int(has.sum()), int(k.sum()), int(scored.sum()), metrics)


def _users(rng: np.random.Generator, n: int, world: World, arm: int) -> tuple[np.ndarray, ...]:
    k = 1 + rng.poisson(world.interactions - 1, size=n)
    if arm == 1 and world.bimodal is not None:
        share, high, low = world.bimodal
        effect = np.where(rng.random(n) < share, high, low)
    else:
        effect = rng.normal(world.delta if arm == 1 else 0.0, world.taste_sd, size=n)
    censored = rng.binomial(k, world.censored[arm])
    invalid = rng.binomial(k, world.invalid[arm])
    return effect, k, censored, invalid, rng.standard_normal(n) * world.noise_sd


def run_trial(rng: np.random.Generator, world: World, config: CanaryConfig,
              thresholds: MonitorThresholds) -> Outcome:  # fmt: skip
    """One canary's life in ``world``: looks until a verdict, the last one past the deadline."""
    if world.canary_users is None:
        on_canary = rng.random(world.users) < world.percent / 100
        n_canary = int(on_canary.sum())
    else:
        n_canary = world.canary_users
    parent = _users(rng, world.users - n_canary, world, 0)
    canary = _users(rng, n_canary, world, 1)
    verdict: CanaryVerdict | None = None
    for look in range(1, world.looks + 1):
        upto = lambda n, look=look: -(-n * look // world.looks)  # noqa: E731
        p = _arm(*(a[: upto(len(parent[0]))] for a in parent))
        c_upto = n_canary if world.canary_users is not None else upto(n_canary)
        c = _arm(*(a[:c_upto] for a in canary))
        verdict = judge(p, c, config, thresholds, look, expired=look == world.looks)
        if verdict.verdict != "wait":
            break
    assert verdict is not None
    return Outcome(verdict.verdict, verdict.look, verdict.reasons, verdict.verdict == "rollout")


@dataclass
class Study:
    """``trials`` seeded trials of one world; ``rate`` of each final verdict."""

    world: World
    config: CanaryConfig
    trials: int = 200
    seed: int = 0
    thresholds: MonitorThresholds = field(default_factory=MonitorThresholds)
    outcomes: list[Outcome] = field(default_factory=list)

    def run(self) -> Study:
        rng = np.random.default_rng(self.seed)
        self.outcomes = [run_trial(rng, self.world, self.config, self.thresholds)
                         for _ in range(self.trials)]  # fmt: skip
        return self

    def rate(self, verdict: str) -> float:
        return sum(o.verdict == verdict for o in self.outcomes) / len(self.outcomes)

    def reasons(self) -> Counter[str]:
        """The first words of every final reason (what ended the canaries)."""
        return Counter(o.reasons[0].split(":")[0] if o.reasons else o.verdict
                       for o in self.outcomes)  # fmt: skip

    def noise(self, rate: float) -> float:
        """Three Monte-Carlo standard errors of a rate at ``rate`` over the trials."""
        return 3 * float(np.sqrt(rate * (1 - rate) / len(self.outcomes)))
