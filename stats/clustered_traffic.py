"""Simulated traffic of one checkpoint for calibrating the monitors' clustered test
(``stats.cluster_ratio``): interactions that are not a textbook's independent draws.

Real traffic differs from i.i.d. Bernoulli rows in the ways that break a naive test:

* per-user tastes: each user calls tools and proposes edits at a rate of their own (a Gamma
  mean of calls, a Beta share of edits), so a user's interactions are alike;
* users arriving by activity: interactions a user are equal, geometric or heavy-tailed
  (Lomax, shape 1.3: infinite variance, a few users hold a large part of the traffic), and a
  user's habits may lean with their activity (``activity_tilt``);
* censoring: privacy-mode users (all their interactions censored, and no ``user_id``, so the
  monitors count them by organisation, or by session where the records carry no ``org_id``:
  ``rewards.monitors.user_key``) and interactions with no outcome (censored at random).

One side is drawn per call; the monitors' rates are sums per unit (a user, or a privacy-mode
user's session), the same units ``rewards.monitors.checkpoint_rates`` groups by.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from stats.cluster_ratio import ClusterRatio, cluster_ratio

Sizes = Literal["equal", "geometric", "pareto"]
PARETO_SHAPE = 1.3  # a Lomax tail with a mean and no variance


@dataclass(frozen=True)
class Traffic:
    """One arm's population: who arrives, how alike a user's interactions are, what is
    censored. Two arms drawn from one ``Traffic`` differ by chance alone (a null world)."""

    users: int = 40
    sizes: Sizes = "geometric"
    mean_size: float = 6.0  # interactions a user, on average
    calls: float = 1.3  # tool calls an interaction, on average
    calls_shape: float = 2.0  # Gamma shape of a user's mean calls: smaller, more unalike users
    edit_rate: float = 0.4
    edit_spread: float = 0.4  # Beta intra-user correlation of edits (0: none, 1: all alike)
    activity_tilt: float = 0.0  # heavy users call more (> 0) or less: log-mean per log-size
    privacy: float = 0.0  # share of users in privacy mode (all censored, counted by session)
    no_outcome: float = 0.0  # share of the other interactions censored at random
    session_mean: float = 3.0  # interactions a session
    orgs: int = 0  # organisations the users belong to; 0: records without ``org_id``

    def moved(self, **changes: float | str) -> Traffic:
        return replace(self, **changes)  # type: ignore[arg-type]


def user_sizes(rng: np.random.Generator, traffic: Traffic) -> np.ndarray:
    """Interactions of each user, at least one, ``mean_size`` on average."""
    if traffic.sizes == "equal":
        return np.full(traffic.users, max(1, round(traffic.mean_size)), dtype=np.int64)
    if traffic.sizes == "geometric":
        return rng.geometric(1 / traffic.mean_size, size=traffic.users)
    lomax_mean = 1 / (PARETO_SHAPE - 1)
    scale = max(traffic.mean_size - 1, 0.0) / lomax_mean
    return 1 + np.floor(scale * rng.pareto(PARETO_SHAPE, size=traffic.users)).astype(np.int64)


def _beta(rng: np.random.Generator, mean: float, spread: float, size: int) -> np.ndarray:
    if spread <= 0:
        return np.full(size, mean)
    a, b = mean * (1 - spread) / spread, (1 - mean) * (1 - spread) / spread
    return rng.beta(a, b, size=size)


@dataclass(frozen=True)
class Side:
    """One arm's interactions: the unit each counts under, and its counts."""

    unit: np.ndarray  # the user, or a privacy-mode user's organisation or session
    user: np.ndarray  # the true user, privacy mode or not
    session: np.ndarray
    org: np.ndarray  # all 0 when the traffic has no organisations
    private: np.ndarray  # bool: the interaction's user is in privacy mode
    n_tool_calls: np.ndarray
    n_edits: np.ndarray
    censored: np.ndarray  # bool


def draw_side(rng: np.random.Generator, traffic: Traffic) -> Side:
    """One arm's interactions (see the module)."""
    sizes = user_sizes(rng, traffic)
    user = np.repeat(np.arange(traffic.users), sizes)
    tilt = (np.log(sizes) - np.log(sizes).mean()) * traffic.activity_tilt
    calls_mean = rng.gamma(traffic.calls_shape, traffic.calls / traffic.calls_shape, traffic.users)
    calls_mean = calls_mean * np.exp(tilt) / np.mean(np.exp(tilt))
    edit = _beta(rng, traffic.edit_rate, traffic.edit_spread, traffic.users)
    private_user = rng.random(traffic.users) < traffic.privacy
    private = private_user[user]
    # a privacy-mode user's sessions: a new one after each interaction with probability 1/mean
    breaks = rng.random(user.size) < 1 / traffic.session_mean
    session = np.cumsum(breaks | np.r_[True, user[1:] != user[:-1]])
    org = rng.integers(0, max(traffic.orgs, 1), size=traffic.users)[user]
    unit = np.where(private, traffic.users + (org if traffic.orgs else session), user)
    return Side(
        unit=unit,
        user=user,
        session=session,
        org=org,
        private=private,
        n_tool_calls=rng.poisson(calls_mean[user]),
        n_edits=(rng.random(user.size) < edit[user]).astype(np.int64),
        censored=private | (rng.random(user.size) < traffic.no_outcome),
    )


def side_ratios(side: Side, by: Literal["unit", "interaction"] = "unit") -> dict[str, ClusterRatio]:
    """The monitors' rates of one arm, as sums per unit (``by="interaction"``: each interaction
    its own unit, the naive i.i.d. reading)."""
    keys = side.unit if by == "unit" else np.arange(side.unit.size)
    _, unit = np.unique(keys, return_inverse=True)
    n = np.bincount(unit).astype(np.float64)
    terms = {
        "tool_call_rate": side.n_tool_calls >= 1,
        "tool_calls_per_interaction": side.n_tool_calls,
        "edit_rate": side.n_edits >= 1,
        "censored_share": side.censored,
    }
    return {
        metric: cluster_ratio(np.bincount(unit, weights=y.astype(np.float64)).tolist(), n.tolist())
        for metric, y in terms.items()
    }
