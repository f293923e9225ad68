"""The canary's error rates as a simulation study (STYLE.md #16): worlds where the truth is
known, many seeded trials each, the canary looked at as data lands, and how often it ends in
each verdict. ``tests/release/test_canary_calibration.py`` holds the rates to their nominal
levels; ``bench/canary_calibration.py`` prints them.

A world: ``users`` users, each on the canary with probability ``percent`` %, arriving evenly
over ``looks`` looks (a look sees every user arrived so far, with all their interactions).
A user has ``1 + Poisson(interactions - 1)`` interactions; their own taste ``effect`` (normal,
sd ``taste_sd``, or for a ``bimodal`` canary one of two values) plus per-interaction noise
(sd ``noise_sd``) is each interaction's reward; each interaction is censored (unscored) with
probability ``censored`` and makes an invalid tool call with probability ``invalid``; a canary
with ``censor_worst`` also leaves that share of its worst interactions (the lowest rewards of
the whole arm) unscored, the "make the bad ones unscorable" hack. The canary's mean taste is the
parent's plus ``delta``: with interaction counts independent of taste and the same censored
share in both arms, ``delta`` is exactly the difference of the mean reward per scored
interaction the canary judges (``release.canary_estimand``). The last look is past the
deadline.

Looks are evenly spaced in time up to the deadline, the last one at it, so the first looks
fall before the minimum exposure. With ``heavy`` users (who make more interactions; the
canary's effect on them and on the others set apart) the canary can post-stratify by them,
weights their expected shares of the interactions (``World.strata_weights``); with
``heavy_first`` they arrive first, as the most active users do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from release.canary import Arm, CanaryVerdict, judge
from release.canary_config import CanaryConfig
from release.canary_estimand import ALL, StratumUsers
from rewards.monitors import MonitorThresholds
from warehouse.ab import RatioSums


@dataclass(frozen=True)
class World:
    users: int = 2000
    percent: float = 10.0
    looks: int = 20
    delta: float = 0.0  # canary - parent, mean taste (the live reward's difference)
    interactions: float = 4.0  # mean per user
    taste_sd: float = 0.3
    noise_sd: float = 0.8
    censored: tuple[float, float] = (0.05, 0.05)  # parent, canary
    invalid: tuple[float, float] = (0.1, 0.1)
    bimodal: tuple[float, float, float] | None = None  # canary taste: (share, high, low)
    canary_users: int | None = None  # a fixed number on the canary, all in the first look
    censor_worst: float = 0.0  # the canary leaves this share of its worst interactions unscored
    # heavy and light users: (share of users who are heavy, their mean interactions, the
    # canary's effect on heavy users, on light ones); the others have ``interactions``
    heavy: tuple[float, float, float, float] | None = None
    heavy_first: bool = False  # heavy users arrive first (else in random order)

    def strata_weights(self) -> dict[str, float]:
        """The heavy and light users' expected shares of the interactions (the canary's strata
        weights, fixed beforehand)."""
        if self.heavy is None:
            return {ALL: 1.0}
        share, heavy_k, _, _ = self.heavy
        heavy, light = share * heavy_k, (1 - share) * self.interactions
        return {"heavy": heavy / (heavy + light), "light": light / (heavy + light)}

    def truth(self) -> float:
        """The canary's difference in mean reward per scored interaction over all users."""
        if self.heavy is None:
            return self.delta
        weights = self.strata_weights()
        return weights["heavy"] * self.heavy[2] + weights["light"] * self.heavy[3]


@dataclass(frozen=True)
class Outcome:
    verdict: str  # the final one: rollout, rollback or wait (never decided)
    look: int
    reasons: tuple[str, ...]
    rolled_out_ever: bool


def _arm(k: np.ndarray, scored: np.ndarray, reward: np.ndarray, invalid: np.ndarray,
         heavy: np.ndarray) -> Arm:  # fmt: skip
    """The same figures as ``release.canary.arm_of`` over these users, with numpy: per user
    interactions, scored ones, reward sum over the scored, invalid calls, whether heavy."""

    def sums(x: np.ndarray, y: np.ndarray) -> RatioSums:
        return RatioSums(len(x), float(x.sum()), float(y.sum()), float((x * x).sum()),
                         float((y * y).sum()), float((x * y).sum()))  # fmt: skip

    kf = k.astype(float)
    metrics = {
        "censored_share": sums(kf, (k - scored).astype(float)),
        "invalid_tool_call_rate": sums(kf, invalid.astype(float)),
    }
    strata = {ALL: np.ones(len(k), bool)} if not heavy.any() and len(k) else {
        "heavy": heavy, "light": ~heavy}  # fmt: skip
    by = {name: StratumUsers(kf[m], scored[m].astype(float), reward[m])
          for name, m in strata.items()}  # fmt: skip
    return Arm(len(k), int((scored > 0).sum()), int(k.sum()), int(scored.sum()), metrics, by)


def _users(rng: np.random.Generator, n: int, world: World, arm: int) -> tuple[np.ndarray, ...]:
    """Per user, in order of arrival: interactions, scored ones, the scored ones' reward sum,
    invalid calls, whether heavy."""
    heavy = np.zeros(n, bool)
    mean_k = np.full(n, world.interactions)
    if world.heavy is not None:
        share, heavy_k, heavy_delta, light_delta = world.heavy
        heavy = rng.random(n) < share
        mean_k = np.where(heavy, heavy_k, world.interactions)
        if world.heavy_first:
            heavy = np.sort(heavy)[::-1]
            mean_k = np.where(heavy, heavy_k, world.interactions)
    k = 1 + rng.poisson(mean_k - 1)
    if arm == 1 and world.bimodal is not None:
        share, high, low = world.bimodal
        effect = np.where(rng.random(n) < share, high, low)
    elif arm == 1 and world.heavy is not None:
        effect = rng.normal(np.where(heavy, world.heavy[2], world.heavy[3]), world.taste_sd)
    else:
        effect = rng.normal(world.delta if arm == 1 else 0.0, world.taste_sd, size=n)
    owner = np.repeat(np.arange(n), k)
    reward = effect[owner] + rng.standard_normal(len(owner)) * world.noise_sd
    scored = rng.random(len(owner)) >= world.censored[arm]
    if arm == 1 and world.censor_worst > 0 and len(owner):
        scored &= reward > np.quantile(reward, world.censor_worst)
    invalid = rng.binomial(k, world.invalid[arm])
    sums = np.bincount(owner, weights=np.where(scored, reward, 0.0), minlength=n)
    return k, np.bincount(owner, weights=scored, minlength=n), sums, invalid, heavy


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
        hours = config.deadline_hours * look / world.looks  # the last look at the deadline
        verdict = judge(p, c, config, thresholds, look, expired=look == world.looks,
                        exposed_hours=hours)  # fmt: skip
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
