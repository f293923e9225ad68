"""Simulated serving logs where the truth is known, for the gate's calibration (the tests in this
folder and ``bench/gate_calibration.py`` draw from the same worlds).

A world is a population of users and a completion choice. Each interaction's first token picks
one of K completion types, with the served (behaviour) policy's probabilities or the candidate's;
the other tokens are the same under both, so a completion's importance weight is exactly the
ratio of its type's probabilities. A user's reward for type k is a coin with chance
``reward[k] + taste[u, k]``: users differ (``taste_sd``) around a population mean
(``taste_mean``), and their activity follows Zipf's law, so a few users make most of the
interactions. The candidate's true gain is ``sum_k (candidate_k - behaviour_k) * (reward_k +
taste_mean_k)`` (tastes are drawn symmetric and never clipped, see ``population``).

A world with ``scored`` leaves some interactions without a reward (censored: null): type k is
scored with chance ``scored[k]``. Its truth is then the gate's estimand, the mean reward per
scored interaction with the candidate's excess censored share counted at the minimum (0):
``V(p) = sum_k p_k s_k m_k / max(sum_k p_k s_k, P_b(S))`` for the candidate, ``V_b`` the
behaviour's scored mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from release.gate import GateConfig, decide
from release.offpolicy_bound import Estimate, estimate_gain


@dataclass(frozen=True)
class Population:
    users: list[str]
    activity: np.ndarray  # each user's share of the interactions
    taste: np.ndarray  # (users, K) added to each type's reward chance


@dataclass(frozen=True)
class Draw:
    """Held-out interactions as an evidence file holds them (log-probs as (n, tokens) arrays)."""

    users: np.ndarray  # each interaction's user, as an index into the population
    rewards: np.ndarray
    behaviour_logprobs: np.ndarray
    candidate_logprobs: np.ndarray
    kinds: np.ndarray  # each interaction's completion type

    def __add__(self, other: Draw) -> Draw:
        return Draw(*(np.concatenate([a, b]) for a, b in zip(self.fields(), other.fields(),
                                                             strict=True)))  # fmt: skip

    def fields(self) -> tuple[np.ndarray, ...]:
        return (self.users, self.rewards, self.behaviour_logprobs, self.candidate_logprobs,
                self.kinds)  # fmt: skip

    def scored_by(self, candidate: tuple[float, ...]) -> Draw:
        """The same interactions with another candidate's log-probabilities."""
        scored = self.behaviour_logprobs.copy()
        scored[:, 0] = np.log(candidate)[self.kinds]
        return Draw(self.users, self.rewards, self.behaviour_logprobs, scored, self.kinds)

    def estimate(self, *, by_interaction: bool = False, scored_only: bool = False,
                 **kwargs: float | str) -> Estimate:  # fmt: skip
        """The gate's estimate on this draw (rewards are coins: range [0, 1]; NaN: censored,
        passed as null); ``by_interaction`` makes every interaction its own unit and
        ``scored_only`` drops the censored ones (what the gate must not do, either)."""
        keep = ~np.isnan(self.rewards) if scored_only else np.ones(len(self.rewards), bool)
        users = np.arange(len(self.users)) if by_interaction else self.users
        log_w = (self.candidate_logprobs - self.behaviour_logprobs).sum(1)
        rewards = [None if np.isnan(r) else float(r) for r in self.rewards[keep]]
        return estimate_gain(np.asarray(users)[keep], rewards, log_w[keep], reward_min=0.0,
                             reward_max=1.0, **kwargs)  # type: ignore[arg-type]  # fmt: skip


@dataclass(frozen=True)
class World:
    name: str
    behaviour: tuple[float, ...]  # the served policy's probability of each completion type
    candidate: tuple[float, ...]
    reward: tuple[float, ...]  # chance of reward 1 for each type, for the average user
    taste_mean: tuple[float, ...] | None = None  # the population's mean taste per type (0)
    taste_sd: tuple[float, ...] | None = None  # spread of taste between users per type (0)
    scored: tuple[float, ...] | None = None  # chance each type's outcome is scored (1)
    users: tuple[int, int] = (30, 40)  # users drawn uniformly in this range, inclusive
    interactions: int = 300
    zipf: float = 1.1
    tokens: int = 8

    def __post_init__(self) -> None:
        k = len(self.behaviour)
        for name in ("candidate", "reward", "taste_mean", "taste_sd", "scored"):
            value = getattr(self, name)
            if value is not None and len(value) != k:
                raise ValueError(f"{name}: one per completion type ({k})")
        for probs in (self.behaviour, self.candidate):
            if abs(sum(probs) - 1) > 1e-9 or min(probs) <= 0:
                raise ValueError("probabilities are positive and sum to 1")

    def _vec(self, value: tuple[float, ...] | None) -> np.ndarray:
        return np.zeros(len(self.behaviour)) if value is None else np.asarray(value)

    def true_gain(self, candidate: tuple[float, ...] | None = None) -> float:
        mean = np.asarray(self.reward) + self._vec(self.taste_mean)
        served, other = np.asarray(self.behaviour), np.asarray(candidate or self.candidate)
        if self.scored is None:
            return float((other - served) @ mean)
        chance = np.asarray(self.scored)
        p_b = float(served @ chance)
        value = float(other @ (chance * mean)) / max(float(other @ chance), p_b)
        return value - float(served @ (chance * mean)) / p_b

    def population(self, rng: np.random.Generator) -> Population:
        n = int(rng.integers(self.users[0], self.users[1] + 1))
        activity = 1.0 / np.arange(1, n + 1) ** self.zipf
        # symmetric taste, truncated symmetrically so that the mean stays exact and every
        # chance stays in [0, 1]
        sd, mean, base = self._vec(self.taste_sd), self._vec(self.taste_mean), self.reward
        room = np.minimum(np.asarray(base) + mean, 1 - np.asarray(base) - mean)
        taste = mean + np.clip(rng.normal(0, 1, size=(n, len(base))) * sd, -room, room)
        return Population([f"u{j}" for j in range(n)], activity / activity.sum(), taste)

    def draw(self, rng: np.random.Generator, population: Population, n: int | None = None,
             candidate: tuple[float, ...] | None = None) -> Draw:  # fmt: skip
        """``n`` interactions served by the behaviour policy to ``population``, with the
        log-probabilities of ``candidate`` (default: the world's)."""
        n = n or self.interactions
        who = rng.choice(len(population.users), size=n, p=population.activity)
        kinds = rng.choice(len(self.behaviour), size=n, p=self.behaviour)
        chance = np.asarray(self.reward)[kinds] + population.taste[who, kinds]
        rewards = (rng.random(n) < chance).astype(np.float64)
        if self.scored is not None:
            rewards[rng.random(n) >= np.asarray(self.scored)[kinds]] = np.nan
        behaviour_lp = np.log(rng.uniform(0.05, 1.0, size=(n, self.tokens)))
        behaviour_lp[:, 0] = np.log(self.behaviour)[kinds]
        draw = Draw(who, rewards, behaviour_lp, behaviour_lp, kinds)
        return draw.scored_by(candidate or self.candidate)


def null_world(name: str, taste_sd: float, **kwargs: object) -> World:
    """The candidate does more of what the served policy did 30 % of the time; users' taste for
    it averages 0, so the true gain is 0."""
    return World(name, behaviour=(0.3, 0.7), candidate=(0.5, 0.5), reward=(0.5, 0.5),
                 taste_sd=(taste_sd, 0.0), **kwargs)  # type: ignore[arg-type]  # fmt: skip


NULL_WORLDS = (
    null_world("null, taste sd 0.3", 0.3),
    null_world("null, taste sd 0.45, steep activity", 0.45, zipf=1.4),
    null_world("null, taste sd 0.2, 600 interactions", 0.2, interactions=600),
)

# Six to eight users of about equal activity, many interactions each: the gain rests on a handful
# of tastes, where the percentile bootstrap over users promotes about twice its level.
FEW_USERS = null_world("null, 6-8 users, 1000 interactions", 0.45, users=(6, 8), zipf=0.5,
                       interactions=1000)  # fmt: skip

# 10-30 users, steep activity, each outright liking or disliking what the candidate does more
# of (taste sd 1 around 0, clipped at the chance's room: most users at 0 or 1), mean taste 0.
# The Bell-McCaffrey degrees of freedom promote 8-9 % of these at 5 %.
STRONG_TASTES = null_world("null, 10-30 users, strong tastes, steep activity", 1.0,
                           users=(10, 30), zipf=1.5, interactions=800)  # fmt: skip

# The candidate piles onto a completion the served policy rarely made (2 % -> 42 %) and users
# dislike (reward 0), and leaves the middling one: true gain -0.084.
COLLAPSE = World("collapse", behaviour=(0.02, 0.49, 0.49), candidate=(0.42, 0.48, 0.10),
                 reward=(0.0, 0.6, 0.2), taste_sd=(0.0, 0.2, 0.1))  # fmt: skip

# Censoring. The candidate moves mass toward a completion users always score and like less
# (type 1: reward 0.5, always scored) from one they like more but score a third of the time
# (type 0: reward 0.8): on scored interactions it is worse (true gain -0.048), while the scored
# interactions alone (the censored dropped) make it look +0.12 better.
CENSORED_DRIFT = World("censored: toward always-scored", behaviour=(0.5, 0.5),
                       candidate=(0.2, 0.8), reward=(0.8, 0.5), scored=(0.3, 1.0),
                       taste_sd=(0.1, 0.1), interactions=400)  # fmt: skip
# The reverse, the "make it unscorable" hack: the candidate moves mass toward a completion whose
# outcome rarely lands (scored 20 %) but is liked when it does (0.9) from one always scored at
# 0.55. Its own scored interactions average 0.63 against the behaviour's 0.57 (the plain ratio
# sum w r 1_S / sum w 1_S estimates +0.06); with the excess censored counted at 0: -0.18.
CENSORED_HACK = World("censored: toward unscorable", behaviour=(0.2, 0.8),
                      candidate=(0.6, 0.4), reward=(0.9, 0.55), scored=(0.2, 1.0),
                      taste_sd=(0.05, 0.1), interactions=400)  # fmt: skip
# A real gain with censoring: the candidate moves toward the better completion, scored less often.
CENSORED_GAIN = World("censored: gain", behaviour=(0.3, 0.7), candidate=(0.6, 0.4),
                      reward=(0.85, 0.4), scored=(0.8, 1.0), taste_sd=(0.05, 0.05),
                      interactions=400)  # fmt: skip

POWER_WORLDS = (
    World("gain +0.08", behaviour=(0.3, 0.7), candidate=(0.6, 0.4), reward=(0.5, 0.5),
          taste_mean=(0.27, 0.0), taste_sd=(0.1, 0.0), interactions=400),
    World("gain +0.12", behaviour=(0.3, 0.7), candidate=(0.6, 0.4), reward=(0.4, 0.4),
          taste_mean=(0.4, 0.0), taste_sd=(0.1, 0.0), interactions=400),
)  # fmt: skip

# Retries: eight attempts on one parent, each candidate favouring another of eight completion
# types the users are indifferent to on average; each attempt's held-out data is every earlier
# batch's plus a new one, from the same users.
RETRY_TYPES = 8
RETRY_BEHAVIOUR = (0.52,) + (0.06,) * RETRY_TYPES
RETRY_WORLD = World("retries", behaviour=RETRY_BEHAVIOUR, candidate=RETRY_BEHAVIOUR,
                    reward=(0.5,) * (RETRY_TYPES + 1),
                    taste_sd=(0.0,) + (0.35,) * RETRY_TYPES, interactions=120)  # fmt: skip


def retry_candidate(attempt: int) -> tuple[float, ...]:
    """Attempt ``attempt`` (1-based) moves its favoured type from 6 % to 30 %."""
    probs = np.asarray(RETRY_BEHAVIOUR, dtype=np.float64)
    probs[attempt % RETRY_TYPES + 1] += 0.24
    probs[0] -= 0.24
    return tuple(float(p) for p in probs)


# The whole gate, but for its sample floors: these worlds are small on purpose.
GATE_CONFIG = GateConfig(min_examples=1, min_users=1)


def promoted(estimate: Estimate) -> bool:
    return decide(estimate, [], GATE_CONFIG).passed


def promotion_rate(
    world: World, trials: int, seed: int, resamples: int, **estimate_options: object
) -> float:
    """The share of ``trials`` seeded draws of ``world`` whose estimate (``resamples``, and the
    options of :meth:`Draw.estimate`) the gate promotes."""
    rng = np.random.default_rng(seed)
    passed = 0
    for trial in range(trials):
        draw = world.draw(rng, world.population(rng))
        passed += promoted(draw.estimate(resamples=resamples, seed=trial, **estimate_options))  # type: ignore[arg-type]
    return passed / trials
