"""The monitors' false-alarm rate against their stated ``alpha`` where traffic is not a textbook's
(``stats.clustered_traffic``): censored interactions, per-user tastes, users arriving by
activity (heavy-tailed), repeated looks as data grow, thin arms at the floors; and the power
that matters, the agent world's tool avoidance among heavy users.

Every null world draws both arms from one population. A false-alarm rate passes when it is at
most ``alpha`` plus three Monte Carlo standard errors of a rate ``alpha`` over the trials
(``margin``): a test fails on a real excess, about once in 700 runs on a seed's luck. The rates
are tested with every threshold at 0 (``NO_THRESHOLDS``), so only the test stands between noise
and an alarm, and Holm across the rates is part of what is measured.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from rewards.monitors import (
    CheckpointRates,
    MonitorThresholds,
    Verdict,
    assess,
    checkpoint_rates,
)
from stats.cluster_ratio import ClusterRatio, one_sided_move
from stats.clustered_traffic import Side, Traffic, draw_side, side_ratios
from tests.support.monitor_calibration import ALPHA, NO_THRESHOLDS, margin

BAD_WAY = {"tool_call_rate": -1, "tool_calls_per_interaction": +1, "edit_rate": -1,
           "censored_share": +1}  # fmt: skip
TASTES = Traffic(users=40, sizes="equal", mean_size=10, calls_shape=0.5, edit_spread=0.6)
HEAVY = Traffic(users=60, sizes="pareto", calls_shape=1.0, edit_spread=0.5, activity_tilt=0.5)
CENSORED = Traffic(users=40, mean_size=10, calls_shape=1.0, edit_spread=0.5, privacy=0.3,
                   no_outcome=0.1, orgs=8)  # fmt: skip


def rates(name: str, ratios: dict[str, ClusterRatio]) -> CheckpointRates:
    return CheckpointRates(name, round(ratios["edit_rate"].total), 0, ratios)


def any_alarm(child: Side, parent: Side, look: int | None = None) -> bool:
    verdicts = assess(rates("child", side_ratios(child)), rates("parent", side_ratios(parent)),
                      NO_THRESHOLDS, look)  # fmt: skip
    return any(v.status == "alarm" for v in verdicts)


def null_alarm_rate(traffic: Traffic, trials: int, seed: int) -> float:
    """The share of null trials with any alarm among the rates (Holm across them)."""
    rng = np.random.default_rng(seed)
    return sum(any_alarm(draw_side(rng, traffic), draw_side(rng, traffic))
               for _ in range(trials)) / trials  # fmt: skip


def per_rate_false_alarms(traffic: Traffic, trials: int, seed: int) -> dict[str, float]:
    """Each rate's one-sided test alone, before Holm: a miscalibrated test cannot hide behind
    the adjustment's slack."""
    rng, hits = np.random.default_rng(seed), dict.fromkeys(BAD_WAY, 0)
    for _ in range(trials):
        child, parent = side_ratios(draw_side(rng, traffic)), side_ratios(draw_side(rng, traffic))
        for metric, way in BAD_WAY.items():
            hits[metric] += one_sided_move(parent[metric], child[metric], way).p_value < ALPHA
    return {metric: hit / trials for metric, hit in hits.items()}


# (a) censored interactions -------------------------------------------------------------------


def records(name: str, side: Side, rng: np.random.Generator,
            extra_censored: float = 0.0) -> pl.DataFrame:  # fmt: skip
    """Reward records of one arm as the monitors read them: a privacy-mode record without
    ``user_id``; ``extra_censored`` of the interactions *with* a tool call lose their outcome
    too (censoring that leans on the behaviour watched)."""
    n = side.user.size
    censored = side.censored | ((side.n_tool_calls > 0) & (rng.random(n) < extra_censored))
    return pl.DataFrame(
        {
            "interaction_id": [f"{name}-{i}" for i in range(n)],
            "revision": np.zeros(n, dtype=np.int64),
            "checkpoint_id": [name] * n,
            "user_id": [None if p else f"{name}-u{u}" for u, p in zip(side.user, side.private,
                                                                         strict=True)],
            "org_id": [f"org{o}" for o in side.org],
            "session_id": [f"{name}-s{s}" for s in side.session],
            "status": np.where(censored, "censored", "scored"),
            "n_edits": side.n_edits,
            "n_clarifying": np.zeros(n, dtype=np.int64),
            "n_invalid_tool_calls": np.zeros(n, dtype=np.int64),
            "n_tool_calls": side.n_tool_calls,
            "n_subagents": np.zeros(n, dtype=np.int64),
            "n_subagents_unused": np.zeros(n, dtype=np.int64),
        }
    )  # fmt: skip


def censored_verdicts(traffic: Traffic, trials: int, seed: int,
                      extra_censored: float) -> list[list[Verdict]]:  # fmt: skip
    """Each trial's verdicts, the records read by ``checkpoint_rates``."""
    rng, out = np.random.default_rng(seed), []
    for _ in range(trials):
        child = records("child", draw_side(rng, traffic), rng, extra_censored)
        parent = records("parent", draw_side(rng, traffic), rng)
        both = pl.concat([child, parent])
        out.append(assess(checkpoint_rates(both, "child"), checkpoint_rates(both, "parent"),
                          NO_THRESHOLDS))  # fmt: skip
    return out


def alarmed(verdicts: list[Verdict]) -> set[str]:
    return {v.metric for v in verdicts if v.status == "alarm"}


def test_privacy_mode_users_of_many_sessions_keep_the_stated_rate():
    """30 % of users in privacy mode (no ``user_id``, all censored) and 10 % of the rest with
    no outcome, alike in both arms: each rate's one-sided test alone, and any alarm across them,
    at most ``alpha``. Counted by session instead of organisation, the censored share alone
    alarmed 10 to 13 % (``bench/monitor_calibration.py``)."""
    trials = 600
    trial_verdicts = censored_verdicts(CENSORED, trials, 11, 0.0)
    for metric in BAD_WAY:
        rate = sum(next(v for v in verdicts if v.metric == metric).p_value < ALPHA
                   for verdicts in trial_verdicts) / trials  # fmt: skip
        assert rate <= ALPHA + margin(ALPHA, trials), (metric, rate)
    rate = sum(bool(alarmed(verdicts)) for verdicts in trial_verdicts) / trials
    assert rate <= ALPHA + margin(ALPHA, trials), rate


def test_censoring_heavier_in_one_arm_moves_no_behaviour_rate():
    """10 % of interactions with no outcome, and the child loses the outcome of a further 30 % of
    its interactions with a tool call: the censored share alarms (it rose), and the behaviour
    rates, which count censored interactions too, alarm no more than ``alpha``. Left out of
    the denominators, those interactions would make the child look as if it stopped calling
    tools."""
    trials = 300
    hits = [alarmed(v) for v in censored_verdicts(CENSORED.moved(privacy=0.0), trials, 12, 0.3)]
    assert sum("censored_share" in hit for hit in hits) / trials >= 0.9
    behaviour = sum(bool(hit - {"censored_share"}) for hit in hits) / trials
    assert behaviour <= ALPHA + margin(ALPHA, trials), behaviour


# (b) per-user tastes, (c) users arriving by activity -------------------------------------------


def test_strong_per_user_tastes_keep_each_rate_at_alpha():
    """40 users of 10 interactions each, each with their own calling and editing habits
    (Gamma shape 0.5, Beta correlation 0.6): each one-sided test alone, and any alarm across
    them, at most ``alpha``. Read as independent interactions, each rate alarms about 25 %."""
    trials = 2000
    for metric, rate in per_rate_false_alarms(TASTES, trials, 21).items():
        assert rate <= ALPHA + margin(ALPHA, trials), (metric, rate)
    trials = 600
    rate = null_alarm_rate(TASTES, trials, 22)
    assert rate <= ALPHA + margin(ALPHA, trials), rate


def test_heavy_tailed_users_keep_each_rate_at_alpha():
    """60 users of Lomax-distributed activity (shape 1.3: a few users hold much of the traffic),
    heavy users calling more, each with their own habits: each one-sided test at most
    ``alpha``. With Bell-McCaffrey's degrees of freedom alone the edit and tool-call rates
    alarmed 7 to 8 %."""
    trials = 3000
    for metric, rate in per_rate_false_alarms(HEAVY, trials, 31).items():
        assert rate <= ALPHA + margin(ALPHA, trials), (metric, rate)


def test_a_quiet_rate_among_heavy_users_is_not_called_ok_without_the_power():
    """The agent world's round, 32 users of Lomax-distributed activity (about 128 runs a side):
    a tool-call share that falls by 1.5 times its threshold alarms there in about a quarter of
    seeds (``bench/monitor_calibration.py``), so a quiet share must read ``underpowered``, never
    ``ok``. Sized on the normal's quantiles instead of the test's t, it read ``ok`` in 5 of
    100."""
    heavy_round = Traffic(users=32, sizes="pareto", mean_size=4, calls=1.3, calls_shape=2.0)
    rng = np.random.default_rng(41)
    for _ in range(100):
        verdicts = assess(rates("child", side_ratios(draw_side(rng, heavy_round))),
                          rates("parent", side_ratios(draw_side(rng, heavy_round))),
                          MonitorThresholds())  # fmt: skip
        share = next(v for v in verdicts if v.metric == "tool_call_rate")
        assert share.status == "underpowered", share


# (d) repeated looks ------------------------------------------------------------------------


def first_users(side: Side, users: int) -> Side:
    keep = side.user < users
    return Side(*(getattr(side, f)[keep] for f in Side.__dataclass_fields__))


def looks_alarm(looks: int, trials: int, seed: int, spend: bool) -> tuple[float, list[float]]:
    """Null arms whose users arrive 20 a look; the share of trials alarmed at *some* look, and
    the share alarmed at each look. ``spend``: look k passes ``look=k``."""
    rng, step = np.random.default_rng(seed), 20
    traffic = Traffic(users=step * looks, calls_shape=1.0, edit_spread=0.5, no_outcome=0.05)
    ever, each = 0, [0] * looks
    for _ in range(trials):
        child, parent = draw_side(rng, traffic), draw_side(rng, traffic)
        hits = [any_alarm(first_users(child, step * k), first_users(parent, step * k),
                          k if spend else None) for k in range(1, looks + 1)]  # fmt: skip
        ever += any(hits)
        each = [e + h for e, h in zip(each, hits, strict=True)]
    return ever / trials, [e / trials for e in each]


def test_each_look_keeps_alpha_and_repeated_looks_do_not():
    """What the monitors state is per look: each of five looks as users arrive alarms at most
    ``alpha``, while the chance of an alarm at *some* look is well above it (the reason the
    statement says per look)."""
    trials = 500
    ever, each = looks_alarm(5, trials, 51, spend=False)
    for k, rate in enumerate(each, 1):
        assert rate <= ALPHA + margin(ALPHA, trials), (k, rate)
    assert ever > 2 * ALPHA, ever


def test_looks_passed_in_keep_alpha_over_all_of_them():
    """With ``look=k`` at the k-th look, the chance of an alarm at any of five looks stays at
    most ``alpha`` (alpha spent as 6 / (pi^2 k^2))."""
    trials = 500
    ever, _ = looks_alarm(5, trials, 52, spend=True)
    assert ever <= ALPHA + margin(ALPHA, trials), ever


# (e) thin arms at the floors ----------------------------------------------------------------


def test_thin_arms_at_the_floors_keep_alpha_and_never_claim_ok():
    """Five users a side and 20 interactions, the floors exactly, and six users of unequal
    activity: each one-sided test at most ``alpha``; and a quiet rate there is never ``ok``
    (its sample cannot carry the stated power)."""
    trials = 2000
    for world in (Traffic(users=5, sizes="equal", mean_size=4, calls_shape=1.0),
                  Traffic(users=6, sizes="geometric", mean_size=4, calls_shape=1.0)):  # fmt: skip
        for metric, rate in per_rate_false_alarms(world, trials, 61).items():
            assert rate <= ALPHA + margin(ALPHA, trials), (world.users, metric, rate)
    rng = np.random.default_rng(62)
    floor = Traffic(users=5, sizes="equal", mean_size=4)
    for _ in range(50):
        verdicts = assess(rates("child", side_ratios(draw_side(rng, floor))),
                          rates("parent", side_ratios(draw_side(rng, floor))),
                          MonitorThresholds())  # fmt: skip
        assert not [v.metric for v in verdicts if v.status == "ok"], verdicts
