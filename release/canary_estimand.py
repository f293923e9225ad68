"""The canary's live reward, estimated as the gate estimates a candidate's: the mean reward per
scored interaction, weighted by interaction, users as the clusters, with the canary's excess
censored share counted at the reward's minimum. Pure (numpy).

Per stratum ``k`` of users (by their activity before the canary; one stratum when none are
configured) and arm, from each user's interactions ``n``, scored interactions ``s`` and reward
sum ``y`` (over the scored ones), with rewards shifted by the reward's minimum, ``y' = y - r_min
s``:

* the parent's value is its scored mean, ``V_p = sum y' / sum s``, and its scored share
  ``P_p = sum s / sum n``;
* the canary's is ``V_c = sum y' / max(sum s, P_p sum n)``: where the canary leaves more of its
  interactions unscored than the parent, the excess counts at the reward's minimum (the "make
  it unscorable" hack, or outcomes that stop landing, never pays);
* the difference is post-stratified with weights fixed beforehand, ``D = sum_k pi_k (V_c,k -
  V_p,k)``; a user's activity before the canary decides its stratum, so a canary whose heavy
  users arrive first is not judged on them alone.

Its variance is the delta method over users, each arm's users independent: per user an
influence value (the linearisation of the two ratios, the parent's scored share included where
the max is taken, so the excess censored share's noise is inside the same confidence sequence),
``Var D = sum_k pi_k^2 (var(psi_c,k) / m_c,k + var(psi_p,k) / m_p,k)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

ALL = "all"  # the one stratum when none are configured


@dataclass(frozen=True)
class StratumUsers:
    """One arm's users of one stratum: per user, interactions, scored ones, reward sum."""

    n: np.ndarray
    s: np.ndarray
    y: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple[float, float, float]]) -> StratumUsers:
        data = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
        return cls(data[:, 0], data[:, 1], data[:, 2])

    @property
    def users(self) -> int:
        return len(self.n)

    @property
    def scored_users(self) -> int:
        return int(np.count_nonzero(self.s > 0))


@dataclass(frozen=True)
class RewardEstimate:
    """Post-stratified values (in reward units), their difference and its variance (None where
    a stratum cannot be compared: no scored interaction, or fewer than two users in an arm)."""

    parent: float | None
    canary: float | None
    difference: float | None
    variance: float | None
    users: int  # both arms, every stratum
    excess_censored: bool  # the canary's scored share was below the parent's in some stratum


def reward_difference(
    parent: Mapping[str, StratumUsers],
    canary: Mapping[str, StratumUsers],
    weights: Mapping[str, float],
    reward_min: float,
) -> RewardEstimate:
    """``canary - parent`` of the live reward (module docstring), over the strata of
    ``weights`` (normalised to sum 1).

    >>> p = StratumUsers.of([(4, 4, 4.0), (4, 4, 0.0)] * 50)        # every outcome scored
    >>> c = StratumUsers.of([(4, 3, 3.0), (4, 4, 0.0)] * 50)  # 1 in 8 unscored: counted at -1
    >>> est = reward_difference({"all": p}, {"all": c}, {"all": 1.0}, reward_min=-1.0)
    >>> round(est.parent, 4), round(est.canary, 4), est.excess_censored
    (0.5, 0.25, True)
    """
    total = sum(weights.values())
    if not weights or total <= 0:
        raise ValueError("strata weights must be positive and sum above 0")
    users = sum(parent[k].users for k in parent) + sum(canary[k].users for k in canary)
    values_p, values_c, variance, excess = 0.0, 0.0, 0.0, False
    for stratum, weight in weights.items():
        p, c = parent.get(stratum), canary.get(stratum)
        part = _stratum(p, c, reward_min) if p is not None and c is not None else None
        if part is None:
            return RewardEstimate(None, None, None, None, users, excess)
        v_p, v_c, var, more = part
        share = weight / total
        values_p += share * v_p
        values_c += share * v_c
        variance += share * share * var
        excess = excess or more
    return RewardEstimate(reward_min + values_p, reward_min + values_c, values_c - values_p,
                          variance, users, excess)  # fmt: skip


def _stratum(p: StratumUsers, c: StratumUsers,
             reward_min: float) -> tuple[float, float, float, bool] | None:  # fmt: skip
    """Shifted values, the difference's variance, and whether the max took the parent's share."""
    if p.users < 2 or c.users < 2 or p.s.sum() <= 0 or c.s.sum() <= 0:
        return None
    yp, yc = p.y - reward_min * p.s, c.y - reward_min * c.s
    n_p, s_p, y_p = p.n.mean(), p.s.mean(), yp.mean()
    n_c, s_c, y_c = c.n.mean(), c.s.mean(), yc.mean()
    share_p = s_p / n_p
    value_p = y_p / s_p
    psi_p = -(yp - value_p * p.s) / s_p
    excess = s_c / n_c < share_p
    if excess:  # the canary's excess censored share counts at the minimum
        value_c = y_c / (n_c * share_p)
        psi_c = (yc - value_c * share_p * c.n) / (n_c * share_p)
        psi_p = psi_p + value_c * (p.n / n_p - p.s / s_p)
    else:
        value_c = y_c / s_c
        psi_c = (yc - value_c * c.s) / s_c
    variance = float(psi_c.var(ddof=1) / c.users + psi_p.var(ddof=1) / p.users)
    return float(value_p), float(value_c), variance, bool(excess)
