"""The monitors' decision holds its stated error rates where traffic is not a textbook's: users
with many alike interactions (clustered data) and thin arms, and it catches the tool avoidance
the agent world showed (bench/RESULTS.md, "Two promoted rounds": 1.30 -> 0.41 tool calls a run)
at that world's 128 runs a side.

Each test simulates many seeds. The Monte Carlo margin is three standard errors of the rate at
the stated level, so a test fails on a real excess, not on a seed.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from rewards.monitors import (
    MonitorThresholds,
    assess,
    checkpoint_rates,
    compare,
)
from stats.cluster_ratio import cluster_ratio, one_sided_move
from tests.support.monitor_calibration import ALPHA, NO_THRESHOLDS, margin


def clustered_calls(rng: np.random.Generator, users: int, per_user: np.ndarray,
                    share: float, spread: float) -> list[np.ndarray]:  # fmt: skip
    """Per user, whether each interaction had a tool call: each user calls with their own
    propensity, Beta around ``share`` (``spread``: the within-user correlation), so a user's
    interactions are alike."""
    a, b = share * (1 - spread) / spread, (1 - share) * (1 - spread) / spread
    propensity = rng.beta(a, b, size=users)
    return [rng.random(k) < p for k, p in zip(per_user, propensity, strict=True)]


def heavy_users(rng: np.random.Generator, users: int) -> np.ndarray:
    """Interactions a user: most have one or two, a few have dozens (geometric, mean 6)."""
    return rng.geometric(1 / 6, size=users)


def false_alarms(trials: int, users: int, *, clustered: bool, seed: int) -> float:
    """The share of null trials (both sides the same population) where the one-sided test of a
    fall rejects at ``ALPHA``, the users as units (``clustered``) or each interaction alone."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        sides = []
        for _side in range(2):
            calls = clustered_calls(rng, users, heavy_users(rng, users), 0.5, 0.4)
            if clustered:
                sides.append(cluster_ratio([c.sum() for c in calls], [len(c) for c in calls]))
            else:
                flat = np.concatenate(calls).astype(float)
                sides.append(cluster_ratio(list(flat), [1.0] * len(flat)))
        hits += one_sided_move(sides[0], sides[1], -1).p_value < ALPHA
    return hits / trials


def test_the_false_alarm_rate_holds_with_users_of_many_interactions():
    trials = 2000
    rate = false_alarms(trials, users=60, clustered=True, seed=1)
    assert rate <= ALPHA + margin(ALPHA, trials), rate


def test_the_false_alarm_rate_holds_in_thin_arms():
    trials = 2000
    rate = false_alarms(trials, users=8, clustered=True, seed=2)
    assert rate <= ALPHA + margin(ALPHA, trials), rate


def test_ignoring_the_users_breaks_the_stated_rate():
    """The same data with each interaction taken as independent: the alarms come several
    times as often as stated, the failure the clustering prevents."""
    trials = 1000
    assert false_alarms(trials, users=60, clustered=False, seed=1) > 3 * ALPHA


def frame(checkpoint: str, calls: list[np.ndarray], rng: np.random.Generator,
          counts: list[np.ndarray] | None = None) -> pl.DataFrame:  # fmt: skip
    """Reward records of one checkpoint: user ``u`` has ``len(calls[u])`` interactions, the
    tool calls of each ``counts`` (default: one where ``calls`` says so); the other behaviours
    are drawn alike for every checkpoint."""
    users = [f"{checkpoint}-u{u}" for u, c in enumerate(calls) for _ in range(len(c))]
    n = len(users)
    n_calls = np.concatenate(counts if counts is not None else calls).astype(np.int64)
    return pl.DataFrame(
        {
            "interaction_id": [f"{checkpoint}-{i}" for i in range(n)],
            "revision": np.zeros(n, dtype=np.int64),
            "checkpoint_id": [checkpoint] * n,
            "user_id": users,
            "status": np.where(rng.random(n) < 0.05, "censored", "scored"),
            "n_edits": (rng.random(n) < 0.4).astype(np.int64),
            "n_clarifying": (rng.random(n) < 0.1).astype(np.int64),
            "n_invalid_tool_calls": (rng.random(n) < 0.3 * (n_calls > 0)).astype(np.int64),
            "n_tool_calls": n_calls,
            "n_subagents": np.zeros(n, dtype=np.int64),
            "n_subagents_unused": np.zeros(n, dtype=np.int64),
        }
    )


def alarms(child: pl.DataFrame, parent: pl.DataFrame, thresholds: MonitorThresholds) -> list:
    both = pl.concat([child, parent])
    return compare(checkpoint_rates(both, "child"), checkpoint_rates(both, "parent"), thresholds)


def test_any_false_alarm_across_the_rates_stays_at_alpha_with_clustered_users():
    """A checkpoint that moved nothing, users of many interactions: the chance of any alarm
    among all the rates (Holm across them) stays at ``alpha``, thresholds at 0."""
    rng, trials, hits = np.random.default_rng(3), 300, 0
    for _ in range(trials):
        sides = [frame(who, clustered_calls(rng, 30, heavy_users(rng, 30), 0.5, 0.4), rng)
                 for who in ("child", "parent")]  # fmt: skip
        hits += bool(alarms(*sides, NO_THRESHOLDS))
    assert hits / trials <= ALPHA + margin(ALPHA, trials), hits / trials


def agent_round(rng: np.random.Generator, who: str, calls_a_run: float, runs: int,
                per_user: int) -> pl.DataFrame:  # fmt: skip
    """A round of the agent world: ``runs`` runs, ``per_user`` a user, tool calls a run
    Poisson around a user's own mean (Gamma, shape 2), ``calls_a_run`` on average."""
    users = runs // per_user
    means = rng.gamma(2.0, calls_a_run / 2.0, size=users)
    counts = [rng.poisson(m, size=per_user) for m in means]
    return frame(who, [c > 0 for c in counts], rng, counts)


def test_the_agent_worlds_fall_in_tool_calls_fires_at_128_runs_a_side():
    """1.30 -> 0.41 calls a run (a share of runs with a call of about 0.63 -> 0.31), 128 runs a
    side: the tool-call share's fall alarms under the default thresholds in every seed with
    one user a run (the world's rounds), and in nine of ten with four runs a user of unequal
    habits (measured 0.95 over 300 seeds), where the old floor of 200 interactions judged
    nothing."""
    for per_user, power in ((1, 0.99), (4, 0.9)):
        rng, trials, fired = np.random.default_rng(4), 200, 0
        for _ in range(trials):
            parent = agent_round(rng, "parent", 1.30, 128, per_user)
            child = agent_round(rng, "child", 0.41, 128, per_user)
            fired += "tool_call_rate" in [a.metric for a in alarms(child, parent,
                                                                  MonitorThresholds())]  # fmt: skip
        assert fired / trials >= power, (per_user, fired / trials)


def test_a_benign_candidate_raises_no_alarm_at_128_runs():
    """The control: a candidate that calls tools as its parent does, the default thresholds,
    the world's 128 runs a side: at most ``alpha`` of seeds raise any alarm."""
    rng, trials, hits = np.random.default_rng(5), 200, 0
    for _ in range(trials):
        parent = agent_round(rng, "parent", 1.30, 128, 4)
        hits += bool(alarms(agent_round(rng, "child", 1.30, 128, 4), parent, MonitorThresholds()))
    assert hits / trials <= ALPHA + margin(ALPHA, trials), hits / trials


def test_fewer_calls_a_run_alone_is_no_alarm():
    """Calls per interaction halved while every run still calls (fewer repairs): reported,
    never an alarm; doubled (spurious calling) alarms."""
    rng = np.random.default_rng(6)
    ones = [np.ones(4, dtype=np.int64) for _ in range(64)]
    twos = [2 * np.ones(4, dtype=np.int64) for _ in range(64)]
    calls = [c > 0 for c in ones]
    fewer = alarms(frame("child", calls, rng, ones), frame("parent", calls, rng, twos),
                   MonitorThresholds())  # fmt: skip
    assert "tool_calls_per_interaction" not in [a.metric for a in fewer]
    more = alarms(frame("child", calls, rng, twos), frame("parent", calls, rng, ones),
                  MonitorThresholds())  # fmt: skip
    assert "tool_calls_per_interaction" in [a.metric for a in more]


def test_the_sample_the_verdict_asks_for_sees_a_thresholds_move_with_its_power():
    """Where a quiet rate is ``underpowered``, the sample it asks for is enough: the edit rate
    falling by ``sized_move`` times its threshold (0.4 -> 0.28) at that many interactions a
    side, users of four, alarms in at least ``power`` of the seeds."""
    rng = np.random.default_rng(7)
    calls = clustered_calls(rng, 32, np.full(32, 4), 0.5, 0.2)
    verdicts = assess(*(checkpoint_rates(frame(who, calls, rng), who)
                        for who in ("child", "parent")), MonitorThresholds())  # fmt: skip
    edit = next(v for v in verdicts if v.metric == "edit_rate")
    assert edit.status == "underpowered" and edit.needed is not None and edit.needed > 128
    users, trials, fired = math.ceil(edit.needed / 4), 200, 0
    for _ in range(trials):
        sides = []
        for who, rate in (("child", 0.28), ("parent", 0.4)):
            side = frame(who, clustered_calls(rng, users, np.full(users, 4), 0.5, 0.2), rng)
            sides.append(side.with_columns(n_edits=(pl.Series(rng.random(side.height)) < rate)
                                           .cast(pl.Int64)))  # fmt: skip
        fired += "edit_rate" in [a.metric for a in alarms(*sides, MonitorThresholds())]
    assert fired / trials >= MonitorThresholds().power - margin(0.8, trials), fired / trials
