"""The canary's verdict: full rollout, rollback, or wait, from the live A/B of a candidate
against its parent. Pure: the figures come in as per-user sums (``release.canary_io`` reads them
from the warehouse's ``rewards`` mart, and says when a look is due).

A candidate that passed the offline gate serves ``percent`` of users as the arm ``canary`` of the
experiment ``canary-<id>``; the rest stay on the arm ``parent``. Users, not interactions, are the
unit: a user's interactions are dependent, and one very active user must not count as many. The
rules, each with its error rate, hold at every look at once (anytime-valid confidence sequences,
``stats.sequential``), so a look may be taken whenever new data lands:

* **Sample-ratio mismatch** (users per arm against the configured share, an anytime-valid
  p-value under ``srm_alpha``, 0.001 as is usual, ``stats.srm``: valid however many looks are
  taken, where a chi-square re-run at every look was not): the split is broken, nothing
  measured on it can be trusted, so the canary is rolled back.
* **Guardrails**, watched at every look: each rate of ``guardrails`` (invalid tool calls,
  clarifying questions, censored share -- the "make it unscorable" hack -- and the edit rate)
  whose one-sided lower bound of the move in its bad direction (``rewards.monitors.BAD_DIRECTION``)
  is above 0, at ``guardrail_alpha`` split evenly over the guardrails, and whose move is past the
  monitors' thresholds, rolls back at once. On a canary no different from its parent, any
  guardrail fires at any look with probability at most ``guardrail_alpha``.
* **Reward, non-inferiority with a margin**: the live reward is the gate's estimand
  (``release.canary_estimand``): the mean reward per scored interaction, users as the
  clusters, the canary's excess censored share counted at the reward's minimum
  (``reward_min``), post-stratified by users' activity before the canary when ``strata`` are
  configured. No verdict on it, and so no rollout, before each arm has ``min_users`` users with
  a scored interaction (and each stratum ``min_stratum_users``). Rolled out once the lower bound of
  ``canary - parent`` is above ``-margin``; rolled back once its upper bound is below it (the
  canary is worse by more than the margin). A canary worse by exactly the margin is rolled out,
  at any look, with probability at most ``alpha``.
* **Arrival order**: users do not come in random order (the heaviest first, others on other
  days), so no rollout before ``min_exposure_hours`` (a weekly cycle by default), each user's
  outcome is taken over a fixed window after their first exposure (``user_window_hours``) and
  counts once it closes (``release.canary_evidence.users_at``), and with ``strata`` the live
  reward is post-stratified by users' activity before the canary, weights fixed beforehand.
* **Deadline**: a canary still undecided when its ``deadline_hours`` are up is rolled back,
  with the reason: too few users with scored interactions, or not shown within the margin.
  Rollout needs evidence; a thin canary never passes by default.

Where a variance is undefined (one user) or not positive, the comparison is "uninformative"
(STYLE.md #15): a guardrail that cannot be tested does not alarm, and a reward that cannot be
tested never counts as no harm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from release.canary_config import CanaryConfig
from release.canary_estimand import ALL, RewardEstimate, StratumUsers, reward_difference
from rewards.monitors import BAD_DIRECTION, MonitorThresholds
from stats.sequential import Difference, anytime_bound
from stats.srm import sequential_srm_p
from warehouse.ab import RatioSums

REWARD = "mean_reward"
CENSORED = "censored_share"
Verdict = Literal["wait", "rollout", "rollback"]


@dataclass(frozen=True)
class Arm:
    """One arm's per-user sums: users (all, and those with a scored interaction),
    interactions (all, and scored), and per metric a ratio of per-user sums."""

    users: int
    scored_users: int
    interactions: int
    scored: int
    metrics: dict[str, RatioSums]  # the monitored rates (x = interactions of each user)
    by_stratum: dict[str, StratumUsers]  # the live reward's figures (release.canary_estimand)

    def seen(self) -> list[int]:
        """What a look saw of this arm: a new look is due only when this changes."""
        return [self.users, self.scored_users, self.interactions, self.scored]


@dataclass(frozen=True)
class UserSums:
    """One user's interactions in one arm: the scored ones and their reward, and per
    monitored rate the interactions that show the behaviour."""

    interactions: int
    scored: int
    reward: float
    flagged: dict[str, int]
    stratum: str = ALL  # by the user's activity before the canary


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
    """An arm's figures: per stratum, each user's interactions, scored ones and reward sum (the
    live reward, ``release.canary_estimand``); each rate as all its users' flagged interactions
    over all their interactions, the censored share among them (interactions not scored).

    >>> arm = arm_of([UserSums(2, 2, 1.0, {"edit_rate": 1}), UserSums(2, 1, 0.0, {})])
    >>> arm.users, arm.scored_users, arm.by_stratum["all"].y.tolist()
    (2, 2, [1.0, 0.0])
    >>> arm.metrics["censored_share"].estimate(), arm.metrics["edit_rate"].estimate()
    (0.25, 0.25)
    """
    metrics = {}
    flags = [{**u.flagged, CENSORED: u.interactions - u.scored} for u in users]
    for metric in {m for f in flags for m in f}:
        metrics[metric] = _ratio([(u.interactions, f.get(metric, 0))
                                  for u, f in zip(users, flags, strict=True)])  # fmt: skip
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for u in users:
        rows.setdefault(u.stratum, []).append((u.interactions, u.scored, u.reward))
    return Arm(len(users), sum(u.scored > 0 for u in users), sum(u.interactions for u in users),
               sum(u.scored for u in users), metrics,
               {k: StratumUsers.of(v) for k, v in rows.items()})  # fmt: skip


def _pooled(arm: Arm) -> dict[str, StratumUsers]:
    """One stratum of all the arm's users."""
    parts = list(arm.by_stratum.values())
    if not parts:
        return {}
    return {ALL: StratumUsers(*(np.concatenate([getattr(p, f) for p in parts])
                                for f in ("n", "s", "y")))}  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    """The canary's figure against the parent's, with anytime-valid bounds of the difference
    (``canary - parent``; one-sided bounds leave the other side None)."""

    metric: str
    parent: float | None
    canary: float | None
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None  # anytime-valid, of ``null``
    null: str  # the hypothesis the p-value is of
    alpha: float
    users: int  # both arms, those the figure rests on
    informative: bool
    why: str | None
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
    seen: dict[str, list[int]]  # arm -> Arm.seen(): a new look is due when this changes
    new_data: bool = True  # False: nothing landed since the last look, none was taken

    def to_json(self) -> dict:
        return asdict(self)


def seen_of(parent: Arm, canary: Arm) -> dict[str, list[int]]:
    return {"parent": parent.seen(), "canary": canary.seen()}


def sample_ratio(parent_users: int, canary_users: int, percent: float, alpha: float) -> Srm:
    """The users per arm against the split: the anytime-valid p-value
    (``stats.srm.sequential_srm_p``), valid at every look, decides; Pearson's chi-square is
    kept as a figure to read (its own p-value would err more often the more looks there are).

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
    p_value = sequential_srm_p(parent_users, canary_users, share)
    return Srm((parent_users, canary_users), share, chi2, p_value, p_value < alpha)


def period_srm(periods: Sequence[tuple[int, int, float]], alpha: float) -> Srm:
    """The sample-ratio check of each period of a constant share, ``(parent users, canary
    users, percent)`` first assigned in it, each at ``alpha`` split over the periods; the
    period with the smallest p-value is reported (any period's mismatch is one).

    >>> period_srm([(900, 100, 10.0), (400, 600, 60.0)], 0.001).mismatch
    False
    >>> period_srm([(900, 100, 10.0), (600, 400, 60.0)], 0.001).observed
    (600, 400)
    """
    if not periods:
        raise ValueError("at least one period")
    checks = [sample_ratio(p, c, percent, alpha / len(periods)) for p, c, percent in periods]
    return min(checks, key=lambda check: check.p_value)


def _difference(parent: RatioSums, canary: RatioSums) -> Difference:
    r_p, r_c = parent.estimate(), canary.estimate()
    v_p, v_c = parent.variance(), canary.variance()
    if r_p is None or r_c is None or v_p is None or v_c is None:
        return Difference(None, None, parent.n + canary.n)
    return Difference(r_c - r_p, v_p + v_c, parent.n + canary.n)


def guardrail(metric: str, parent: RatioSums, canary: RatioSums, alpha: float,
              tuning_users: int) -> Comparison:  # fmt: skip
    """A rate's move in its bad direction, one-sided and anytime-valid: ``alarm`` is left to
    the caller (it also asks for a material move), ``p_value`` is that of "no worse".

    >>> p = RatioSums(n=400, sx=400, sy=40, sxx=400, syy=40, sxy=40)   # 10 %, 1 per user
    >>> c = RatioSums(n=400, sx=400, sy=80, sxx=400, syy=80, sxy=80)   # 20 %
    >>> g = guardrail("invalid_tool_call_rate", p, c, 0.05, 2000)
    >>> round(g.low, 3), g.high, g.p_value < 0.01
    (0.029, None, True)
    """
    d = _difference(parent, canary)
    sign = 1.0 if BAD_DIRECTION[metric] == "up" else -1.0
    bad = Difference(None if d.estimate is None else sign * d.estimate, d.variance, d.units)
    b = anytime_bound(bad, alpha, tuning_users, "lower", 0.0)
    low, high = (b.low, None) if sign > 0 else (None, None if b.low is None else -b.low)
    return Comparison(metric, parent.estimate(), canary.estimate(), d.estimate, low, high,
                      b.p_value, f"no worse ({BAD_DIRECTION[metric]} is worse)", alpha, d.units,
                      b.informative, b.why, False)  # fmt: skip


def non_inferiority(parent: Arm, canary: Arm, config: CanaryConfig) -> Comparison:
    """The live reward (``release.canary_estimand``, post-stratified by ``config.strata``):
    anytime-valid one-sided bounds of ``canary - parent`` at ``alpha`` each; ``p_value`` is that
    of "worse by the margin or more" (small: shown non-inferior)."""
    est = live_reward(parent, canary, config)
    d = Difference(est.difference, est.variance, est.users)
    lower = anytime_bound(d, config.alpha, config.tuning_users, "lower", -config.margin)
    upper = anytime_bound(d, config.alpha, config.tuning_users, "upper", -config.margin)
    return Comparison(REWARD, est.parent, est.canary, d.estimate, lower.low, upper.high,
                      lower.p_value, f"canary - parent <= -{config.margin:g}", config.alpha,
                      d.units, lower.informative, lower.why, False)  # fmt: skip


def live_reward(parent: Arm, canary: Arm, config: CanaryConfig) -> RewardEstimate:
    """The live reward's estimate: over the configured strata, or all users as one."""
    if config.strata is None:
        return reward_difference(_pooled(parent), _pooled(canary), {ALL: 1.0}, config.reward_min)
    return reward_difference(parent.by_stratum, canary.by_stratum, config.strata,
                             config.reward_min)  # fmt: skip


def thin_strata(parent: Arm, canary: Arm, config: CanaryConfig) -> list[str]:
    """The configured strata with fewer than ``min_stratum_users`` scored users in an arm."""
    if config.strata is None:
        return []
    empty = StratumUsers.of([])
    return [
        k for k in config.strata
        if min(parent.by_stratum.get(k, empty).scored_users,
               canary.by_stratum.get(k, empty).scored_users) < config.min_stratum_users
    ]  # fmt: skip


def judge(parent: Arm, canary: Arm, config: CanaryConfig, thresholds: MonitorThresholds,
          look: int, expired: bool = False, crossed: int = 0,
          exposed_hours: float | None = None,
          assigned: Sequence[tuple[int, int, float]] | None = None) -> CanaryVerdict:  # fmt: skip
    """The verdict at ``look`` (1-based); ``expired``: the canary's deadline has passed, so an
    undecided canary is rolled back. ``crossed``: users seen in both arms (each is in both
    arms' figures too); past ``max_crossed_share`` of all users the split does not hold people
    apart, and the canary is rolled back as on a sample-ratio mismatch. ``exposed_hours``: the
    time since the canary started (None: not known, no minimum exposure applies); no rollout
    before ``min_exposure_hours``. ``assigned``: per period of a constant share, the users
    first assigned to parent and canary in it and the canary's percent, each period tested on
    its own (default: the arms' users at ``config.percent``)."""
    srm = period_srm(assigned or [(parent.users, canary.users, config.percent)], config.srm_alpha)
    parent_users, canary_users = srm.observed
    seen = seen_of(parent, canary)
    reasons: list[str] = []
    people = parent.users + canary.users - crossed
    if people and crossed > config.max_crossed_share * people:
        reasons.append(
            f"users in both arms: {crossed} of {people} ({crossed / people:.1%}, more than the "
            f"{config.max_crossed_share:.1%} allowed): the split does not keep people apart, "
            "the A/B cannot be trusted"
        )
    if srm.mismatch:
        reasons.append(
            f"sample ratio mismatch: {parent_users} / {canary_users} users for a "
            f"{100 - 100 * srm.expected_share:g} / {100 * srm.expected_share:g} split "
            f"(chi-square {srm.chi2:.1f}, "
            f"anytime-valid p {srm.p_value:.2g}): the split is broken, the A/B cannot be trusted"
        )
    watched = [m for m in config.guardrails if m in parent.metrics and m in canary.metrics]
    guard_alpha = config.guardrail_alpha / max(len(watched), 1)
    comparisons = []
    for metric in watched:
        c = guardrail(metric, parent.metrics[metric], canary.metrics[metric], guard_alpha,
                      config.tuning_users)  # fmt: skip
        limit = getattr(thresholds, metric)
        enough = min(parent.interactions, canary.interactions) >= thresholds.min_samples
        bound = c.low if c.low is not None else (None if c.high is None else -c.high)
        if enough and bound is not None and bound > 0 and c.parent is not None:
            moved = abs(c.difference or 0.0)
            relative = math.inf if c.parent == 0 else moved / c.parent
            if moved >= limit.absolute and relative >= limit.relative:
                c = Comparison(**{**asdict(c), "alarm": True})
                reasons.append(
                    f"guardrail: {metric} {c.parent:.3f} -> {c.canary:.3f} (anytime-valid "
                    f"p {c.p_value:.2g} < {guard_alpha:.3g} for 'no worse')"
                )
        comparisons.append(c)
    reward = non_inferiority(parent, canary, config)
    everything = (reward, *comparisons)
    if reasons:
        return CanaryVerdict("rollback", tuple(reasons), srm, everything, look, seen)
    thin = min(parent.scored_users, canary.scored_users) < config.min_users
    thin_ones = thin_strata(parent, canary, config)
    why = None
    if thin:
        why = (f"{parent.scored_users} parent and {canary.scored_users} canary users with a "
               f"scored interaction; {config.min_users} needed in each arm")  # fmt: skip
    elif thin_ones:
        why = (f"strata {', '.join(thin_ones)} thin: fewer than {config.min_stratum_users} "
               "users with a scored interaction in an arm")  # fmt: skip
    elif not reward.informative:
        why = f"the live reward cannot be compared: {reward.why}"
    elif reward.high is not None and reward.high < -config.margin:
        reward = Comparison(**{**asdict(reward), "alarm": True})
        reasons.append(
            f"live reward worse: {reward.parent:.4f} -> {reward.canary:.4f} (difference "
            f"{reward.difference:+.4f}, upper bound {reward.high:+.4f} below the margin "
            f"-{config.margin:g})"
        )
        return CanaryVerdict("rollback", tuple(reasons), srm, (reward, *comparisons), look, seen)
    elif reward.low is not None and reward.low > -config.margin:
        if exposed_hours is None or exposed_hours >= config.min_exposure_hours:
            return CanaryVerdict("rollout", (), srm, everything, look, seen)
        why = (f"live reward shown within the margin, but exposed {exposed_hours:.0f} h of the "
               f"{config.min_exposure_hours:g} h minimum")  # fmt: skip
    else:
        why = (f"live reward {reward.difference:+.4f} not yet shown within the margin "
               f"-{config.margin:g} (bounds {reward.low:+.4f}, {reward.high:+.4f})")  # fmt: skip
    if expired:
        return CanaryVerdict("rollback", (f"deadline of {config.deadline_hours:g} h passed: "
                                          f"{why}",), srm, everything, look, seen)  # fmt: skip
    return CanaryVerdict("wait", (why,), srm, everything, look, seen)
