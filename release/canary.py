"""The canary's verdict: full rollout, rollback, or wait, from the live A/B of a candidate
against its parent. Pure: the figures come in as per-user sums (``release.canary_io`` reads them
from the warehouse's ``rewards`` mart).

A candidate that passed the offline gate serves ``percent`` of users as the arm ``canary`` of the
experiment ``canary-<id>``; the rest stay on the arm ``parent``. Users, not interactions, are the
unit of randomisation, so every rate is a ratio of per-user sums with its delta-method variance
(``warehouse.ab.RatioSums``). The rules, each with its error rate:

* **Sample-ratio mismatch** (Pearson chi-square of users per arm against the configured shares,
  p < ``srm_alpha``, 0.001 by default as is usual): the split is broken, nothing measured on it
  can be trusted, so the canary is rolled back.
* **Live alarms**, tested at every look: a monitored rate that moved in its bad direction
  (``rewards.monitors.BAD_DIRECTION``), significantly (one-sided z at ``alpha / looks``, so that
  ``looks`` looks together keep the false-alarm rate at most ``alpha``) and past the monitors'
  thresholds, rolls back at once.
* **Reward**, judged once, when the canary arm holds ``min_interactions``: rolled back when its
  mean reward is significantly below the parent's less ``max_loss`` (one-sided, ``alpha``); rolled
  out otherwise. The offline gate already asked for evidence of a gain; the canary asks only
  that live traffic shows no harm, so on data with no signal it rolls back about ``alpha`` of
  candidates (``tests/release/test_canary.py`` measures it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from checkpoints.canary_names import experiment_of
from rewards.monitors import BAD_DIRECTION, MonitorThresholds
from warehouse.ab import RatioSums

REWARD = "mean_reward"
Verdict = Literal["wait", "rollout", "rollback"]


class CanaryConfig(BaseModel):
    """How a canary is run and judged."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    percent: float = Field(10.0, gt=0, lt=100)  # share of users on the candidate
    min_interactions: int = Field(200, ge=1)  # in the canary arm before the reward verdict
    alpha: float = Field(0.05, gt=0, lt=0.5)  # one-sided error rate of a rollback on no signal
    looks: int = Field(5, ge=1)  # most verdicts asked of one canary; the last one decides
    srm_alpha: float = Field(0.001, gt=0, lt=0.5)
    max_loss: float = Field(0.0, ge=0)  # a reward loss smaller than this is no harm


def canary_stage(candidate: str, config: CanaryConfig) -> dict:
    """What a canary's checkpoint records of its stage (``evals["canary"]``) when registered:
    its experiment, its share and rules; ``outcome`` is set once, by its verdict."""
    return {
        "experiment": experiment_of(candidate),
        "percent": config.percent,
        "config": config.model_dump(),
        "looks": 0,
        "outcome": None,
        "verdicts": [],
    }


@dataclass(frozen=True)
class Arm:
    """One arm's per-user sums: users, interactions, and per metric a ratio of sums."""

    users: int
    interactions: int
    metrics: dict[str, RatioSums]  # REWARD and the monitored rates


@dataclass(frozen=True)
class UserSums:
    """One user's interactions in one arm: the scored ones and their reward, and per
    monitored rate the interactions that show the behaviour."""

    interactions: int
    scored: int
    reward: float
    flagged: dict[str, int]


def _ratio(pairs: list[tuple[float, float]]) -> RatioSums:
    """RatioSums of (x, y) pairs, one per user."""
    return RatioSums(
        len(pairs),
        sum(x for x, _ in pairs),
        sum(y for _, y in pairs),
        sum(x * x for x, _ in pairs),
        sum(y * y for _, y in pairs),
        sum(x * y for x, y in pairs),
    )


def arm_of(users: list[UserSums]) -> Arm:
    """An arm's figures from its users' sums: reward over scored interactions, each rate over
    all interactions (as the monitors count them).

    >>> arm = arm_of([UserSums(2, 2, 1.0, {"edit_rate": 1}), UserSums(1, 1, 0.0, {"edit_rate": 1})])
    >>> arm.users, arm.interactions, arm.metrics["mean_reward"].estimate()
    (2, 3, 0.3333333333333333)
    """
    metrics = {REWARD: _ratio([(u.scored, u.reward) for u in users])}
    for metric in {m for u in users for m in u.flagged}:
        metrics[metric] = _ratio([(u.interactions, u.flagged.get(metric, 0)) for u in users])
    return Arm(len(users), sum(u.interactions for u in users), metrics)


@dataclass(frozen=True)
class Comparison:
    metric: str
    parent: float | None
    canary: float | None
    difference: float | None  # canary - parent
    ci_low: float | None  # two-sided 1 - 2 alpha interval of the difference
    ci_high: float | None
    p_value: float | None  # one-sided, in the metric's bad direction (reward: down)
    alarm: bool


@dataclass(frozen=True)
class Srm:
    observed: tuple[int, int]  # users in parent, canary
    expected_share: float  # of the canary arm
    chi2: float
    p_value: float
    mismatch: bool


@dataclass(frozen=True)
class CanaryVerdict:
    verdict: Verdict
    reasons: tuple[str, ...]
    srm: Srm
    comparisons: tuple[Comparison, ...]
    look: int

    def to_json(self) -> dict:
        return asdict(self)


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def sample_ratio(parent_users: int, canary_users: int, percent: float, alpha: float) -> Srm:
    """Pearson chi-square (1 degree of freedom) of the users per arm against the split.

    >>> s = sample_ratio(1000, 1000, 50, 0.001)
    >>> s.chi2, s.mismatch
    (0.0, False)
    >>> sample_ratio(1100, 900, 50, 0.001).mismatch
    True
    """
    total = parent_users + canary_users
    share = percent / 100
    if total == 0:
        return Srm((parent_users, canary_users), share, 0.0, 1.0, False)
    expected = (total * (1 - share), total * share)
    chi2 = sum((o - e) ** 2 / e for o, e in zip((parent_users, canary_users), expected,
                                                strict=True))  # fmt: skip
    p_value = math.erfc(math.sqrt(chi2 / 2))  # chi-square survival function, df = 1
    return Srm((parent_users, canary_users), share, chi2, p_value, p_value < alpha)


def compare_metric(metric: str, parent: RatioSums, canary: RatioSums, alpha: float,
                   shift: float = 0.0) -> Comparison:  # fmt: skip
    """The canary's rate against the parent's: difference, interval and the one-sided p-value
    of a move in the bad direction by more than ``shift``.

    >>> p = RatioSums(n=400, sx=400, sy=40, sxx=400, syy=40, sxy=40)   # 10 %, 1 per user
    >>> c = RatioSums(n=400, sx=400, sy=80, sxx=400, syy=80, sxy=80)   # 20 %
    >>> f'{compare_metric("invalid_tool_call_rate", p, c, 0.05).p_value:.1e}'
    '3.2e-05'
    """
    r_p, r_c = parent.estimate(), canary.estimate()
    v_p, v_c = parent.variance(), canary.variance()
    if r_p is None or r_c is None or v_p is None or v_c is None:
        return Comparison(metric, r_p, r_c, None, None, None, None, False)
    diff = r_c - r_p
    se = math.sqrt(v_p + v_c)
    z_half = _z(1 - alpha)
    sign = 1.0 if BAD_DIRECTION.get(metric, "down") == "up" else -1.0
    if se > 0:
        p_value = _norm_sf((sign * diff - shift) / se)
    else:
        p_value = 0.0 if sign * diff > shift else 1.0
    return Comparison(metric, r_p, r_c, diff, diff - z_half * se, diff + z_half * se, p_value,
                      False)  # fmt: skip


def _z(q: float) -> float:
    """The standard normal quantile (bisection on erfc: exact enough, no scipy)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 1 - _norm_sf(mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def judge(parent: Arm, canary: Arm, config: CanaryConfig, thresholds: MonitorThresholds,
          look: int) -> CanaryVerdict:  # fmt: skip
    """The verdict at ``look`` (1-based; at ``config.looks`` a verdict is forced)."""
    srm = sample_ratio(parent.users, canary.users, config.percent, config.srm_alpha)
    reasons: list[str] = []
    if srm.mismatch:
        reasons.append(
            f"sample ratio mismatch: {parent.users} / {canary.users} users for a "
            f"{100 - config.percent:g} / {config.percent:g} split (chi-square {srm.chi2:.1f}, "
            f"p {srm.p_value:.2g}): the split is broken, the A/B cannot be trusted"
        )
    live_alpha = config.alpha / config.looks
    comparisons = []
    for metric in sorted(BAD_DIRECTION):
        if metric not in parent.metrics or metric not in canary.metrics:
            continue
        c = compare_metric(metric, parent.metrics[metric], canary.metrics[metric], live_alpha)
        limit = getattr(thresholds, metric)
        enough = min(parent.interactions, canary.interactions) >= thresholds.min_samples
        if enough and c.p_value is not None and c.p_value < live_alpha and c.parent is not None:
            moved = abs(c.difference or 0.0)
            relative = math.inf if c.parent == 0 else moved / c.parent
            if moved >= limit.absolute and relative >= limit.relative:
                c = Comparison(**{**asdict(c), "alarm": True})
                reasons.append(
                    f"live alarm: {metric} {c.parent:.3f} -> {c.canary:.3f} (one-sided p "
                    f"{c.p_value:.2g} < {live_alpha:.3g})"
                )
        comparisons.append(c)
    reward = compare_metric(
        REWARD, parent.metrics[REWARD], canary.metrics[REWARD], config.alpha, config.max_loss
    )
    if reasons:
        return CanaryVerdict("rollback", tuple(reasons), srm, (reward, *comparisons), look)
    if canary.interactions < config.min_interactions:
        if look < config.looks:
            why = f"{canary.interactions} of {config.min_interactions} canary interactions"
            return CanaryVerdict("wait", (why,), srm, (reward, *comparisons), look)
        reasons.append(
            f"the canary served {canary.interactions} interactions in {look} looks, fewer "
            f"than the {config.min_interactions} needed"
        )
    elif reward.p_value is not None and reward.p_value < config.alpha:
        reward = Comparison(**{**asdict(reward), "alarm": True})
        reasons.append(
            f"live reward worse: {reward.parent:.4f} -> {reward.canary:.4f} (difference "
            f"{reward.difference:+.4f}, one-sided p {reward.p_value:.2g} < {config.alpha:g})"
        )
    verdict: Verdict = "rollback" if reasons else "rollout"
    return CanaryVerdict(verdict, tuple(reasons), srm, (reward, *comparisons), look)
