"""The gate's statistics: a candidate's gain over the served policy, and a lower bound of it
that stays valid on traffic as it comes. Pure numpy (and ``stats.student_t``): no torch, no
polars, so the decision can be recomputed from an evidence file anywhere (``rtrl gate
evaluate``) and calibrated on simulated worlds (``tests/release``).

**The estimator.** Each held-out interaction ``i`` was served by the behaviour policy; its
sequence weight ``w_i = exp(sum_t log p_candidate - log p_behaviour)`` is clipped at ``cap``,
``w~_i = min(w_i, cap)``, and its reward is shifted into ``[0, 1]`` by the known range of the
reward, ``r'_i = (r_i - r_min) / (r_max - r_min)`` (the range follows from the reward's
configuration: ``rewards.config.RewardConfig.reward_range``). The candidate's value is the plain
(not self-normalised) mean ``sum w~ r' / n``, the behaviour's the plain mean ``sum r' / n``.
Because ``r' >= 0``, clipping a weight only removes mass: the clipped mean is at most the
unclipped one on every sample, so the clip can only lower the estimate and what the bound
covers (its expectation, the *clipped gain*, is at most the true gain), never lift them. The
same holds for completions the candidate would make and the behaviour never could (top-p cuts
them from its support): their mass is missing, and missing mass on non-negative rewards is a
loss too. Self-normalising would break both: dividing by ``sum w~`` gives back the mass a clip
removed, spread over the other completions, which is how a per-token cap of 2 once turned a
candidate that piles onto a disliked completion (served 2 %, candidate 42 %) into an estimated
gain. The price is variance from the shift; the estimator never leans toward promoting.

**Full support: untruncated weights, centred (``CENTRED_METHOD``).** When the behaviour's
sampling could draw every token (``top_p = 1``: a softmax at any temperature puts mass on every
token), every sequence the candidate can make the behaviour could have made too, and the
untruncated weights have mean exactly 1 under the behaviour: ``E[w] = 1``. Then
``E[(w - 1)(r - b)]`` is the true gain for every constant ``b``, and the gate takes ``b`` the
behaviour's mean reward, ``(w_i - 1)(r_i - mean r)`` per interaction (a control variate for the
known ``E[w] = 1``; estimating ``b`` adds a bias of order ``1/n`` times ``mean(w) - 1``). This is
the clipped estimator without its price: shifting by ``r_min`` keeps the clip honest but makes
the variance ``Var(w)`` times the squared mean shifted reward, most of which is the shift, not
the users; on the loop's own held-out interactions (`rtrl run`, 8-token completions, KL about 1
per interaction) the centred bound is three to five times narrower. The weights are not
clipped, so the diagnostics that guard their tail (ESS and KL below, with the gate's limits) are
computed on these very weights, and a candidate that piles onto a rare completion is seen with
its whole weight (the clip is what once hid it). One finite-sample guard stays: a draw that
barely saw such a completion has ``mean(w) < 1``, the mass it missed, and centring would credit
that mass with the mean reward; it is credited with the worst (``r_min``) instead, subtracting
``(mean r' - 0) * max(0, 1 - mean w)`` from the gain and its bound (without it, 1.5 % of the
collapse world's draws below were promoted at alpha 0.05). With a nucleus
(``top_p < 1``) the candidate can make completions the behaviour never could, ``E[w] < 1`` by
their unknown mass, and centring would credit that mass with the mean reward: those decisions use
the clipped estimator above. Evidence rows say which (``full_support``); rows without it are
judged the clipped way.

**Censored interactions (reward null, no outcome).** The estimand is the mean reward per
scored interaction, and censored interactions stay in the evidence: dropping them would let a
candidate that moves mass toward completions users always score, away from ones they like more
but often leave unscored, look better than it is (a scored-only clipped estimate of +0.11 where
the true gain on scored interactions is -0.06). With ``S`` "scored", the candidate's value is
``V_c = E_c[r' 1_S] / max(P_c(S), P_b(S))``: where the candidate leaves more unscored than the
behaviour, the excess counts at the reward's minimum (r' = 0), so making interactions
unscorable never pays. Computed as ``mean(w~ r' 1_S) / max(1 - mean(w~ 1_not-S), P_b(S))``:
the clip lowers the numerator and raises the denominator, so it can only lower the value (the
plain ratio ``sum w~ r' 1_S / sum w~ 1_S`` can rise under clipping). The centred method uses
``E[w] = 1`` as a control variate for both means, and counts the mass its sample missed as
scored at the worst reward. The behaviour's value is its mean reward over scored interactions.
The bound's standard error is the same CR2 over users, applied to each interaction's
linearisation of the two ratios (``_censored_ratio``); with nothing censored every figure is
exactly what it was without censoring. The canary's censored-share rule stays a guardrail that
can only block.

**Evidence an earlier checkpoint served: both arms off-policy.** A line's held-out users of
rounds an earlier checkpoint served (before the parent's promotion) were never trained on (one
hold-out hash), so they may judge the parent's candidate too. Their rewards are the earlier
checkpoint's: read as the parent's, they credit the candidate with the parent's own gain (an
equal candidate was promoted in 38 % of draws at 5 %, ``tests/release/test_offpolicy_parent``).
The parent's value is estimated from them like the candidate's, with its own weights ``w_p``
(1 on the rows it served) and the same centred control variate: the pseudo-value is the
difference of the two arms' linearisations, with the variance of ``w_c - w_p``. A sample's
missed mass counts at the worst reward for the candidate, the best for the parent. The KL
diagnostic is KL(parent || candidate), ``sum w_p (log w_p - log w_c) / sum w_p``: from the
earlier checkpoint it would count the parent's own step too. Centred methods only: clipping
the parent's weights would lift the gain.

**The unit is the user.** One user's interactions share their taste and are dependent; users are
the independent draws. An interaction without a user id is keyed by its session id when it has
one, else it is its own user (:func:`user_key`): the conservative choice would be impossible (no
id), and a session is at least as dependent as a user's interactions within it.

**The bound: CR2 standard error, Bell-McCaffrey t (``METHOD``).** The gain is a ratio of user
sums, ``sum_g d_g / N`` with ``d_g`` user ``g``'s sum of ``w~ r' - r'`` over its ``n_g``
interactions and ``N = sum n_g``: the weighted mean of a regression on an intercept, clustered
by user. Its lower bound is ``gain - t_df(level) * se`` with

* ``se^2 = sum_g e_g^2 / (1 - h_g) / N^2``, ``e_g = d_g - gain n_g`` and ``h_g = n_g / N``, the
  user's leverage: the bias-reduced cluster-robust variance CR2 (Bell & McCaffrey 2002), whose
  leverage correction is exactly ``1 / (1 - h_g)`` for an intercept. A heavy user pulls the
  mean toward itself and so shrinks its own residual; CR2 gives that back.
* ``df = 1 / tr(B^2)``, ``B = D^-1/2 (diag(h) - h h^T) D^-1/2``, ``D = diag(1 - h)``: the
  Bell-McCaffrey (Satterthwaite) degrees of freedom of that variance under independent
  interactions, in O(users) (``stats.cluster_ratio.bell_mccaffrey_df``). With ``G`` equal users
  they are ``G - 1``; when a few users carry most of the data they fall toward 1, which is
  what the bound needs: its variance then rests on those few users.

**Degrees of freedom when users' tastes dominate (``METHOD``, ``CENTRED_METHOD``).** The
Bell-McCaffrey degrees of freedom assume a user's interactions are independent given the
user. Where each user outright likes or dislikes what the candidate does more of, a user's
interactions move together, a heavy user's sum varies nearly as its count squared, and those
degrees of freedom overstate what the few heavy users can say: 10-30 users with steep activity
and strong tastes (mean taste 0) were promoted 7-10 % of the time at a nominal 5 %. The gate
takes the fewer of Bell-McCaffrey's and Imbens and Kolesar's (2016) at an upper 95 % bound of
the within-user correlation of the interactions' linearised terms
(``release.cluster_df``), never the correlation's
estimate alone (biased low with few users). Same standard error, a wider t where it matters.
At a correlation of 1 outright, power at gain +0.08 fell from 0.73 to 0.26; at the bound it is
0.54 (bench/RESULTS.md). ``BM_METHOD`` and ``BM_CENTRED_METHOD`` are the Bell-McCaffrey bounds,
kept to re-run earlier decisions.

Why not a bootstrap over users: the percentile bootstrap the gate used before (kept as
``PERCENTILE_METHOD``, for comparison and to re-run earlier decisions) promoted 0.042 of
no-gain candidates at a nominal 0.030, 0.070 at 0.050, in worlds of 30-40 users with steep
activity or many interactions per user; a studentized (bootstrap-t) user bootstrap, tried with
CR1, CR2 and CR3 studentization, was worse still there (0.055-0.080 at 0.030 and 0.050): a
resample that leaves out the heaviest user is another world, not a draw like the data. CR2 with
Bell-McCaffrey degrees of freedom is what Imbens & Kolesar (2016) and Pustejovsky & Tipton (2018)
recommend for few or unequal clusters; it holds the nominal level in every null world of
``tests/release/worlds.py`` (bench/RESULTS.md, "Gate calibration"), costs no resamples, and is
the same for every seed. The price is power where users are many and alike, since ``t_df`` is
wider than the bootstrap's quantile.

Edge cases, each a valid bound: fewer than two users say nothing about how users differ, and the
bound is the worst gain the range allows, ``-(r_max - r_min)`` (the candidate's clipped mean is
``>= r_min``, the behaviour's ``<= r_max``), finite so that it stays valid JSON; the bound is
never below that either. Users whose ratios ``d_g / n_g`` are all equal have no spread: ``se = 0``
and the bound is the estimate (with the gate's ``min_users`` there are never that few).

**The clip and the bound.** The point estimate falls with every tighter clip on every sample,
and the percentile bound did too (each resample's gain falls). The CR2 bound need not: a tighter
clip lowers the gain but can also lower its standard error (``df`` depends on the users' shares
only), so on one sample a tighter clip may give a higher bound. What holds, and what the bound's
validity rests on, is the estimand: the bound covers the clipped gain, which is at most the true
gain for every clip, so a clip never makes the bound promise more than the truth.

**Diagnostics on the same weights.** ESS ``(sum w~)^2 / sum w~^2`` and the KL estimate
``mean(-log w~)`` (of KL(behaviour || candidate) per interaction) use the clipped weights the
estimate uses; the clip can only raise this KL estimate, so its limit is not loosened by the
clip. ``clipped`` counts the interactions whose weight was cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infra.tenancy import scoped_key
from release.cluster_df import imbens_kolesar_df, within_user_correlation_bound
from stats.cluster_ratio import bell_mccaffrey_df
from stats.student_t import t_quantile

METHOD = "clipped-is-user-cr2-ik-t"  # the gate's bound where the behaviour had a nucleus
CENTRED_METHOD = "centred-is-user-cr2-ik-t"  # ... where it could draw every token
# the same with Bell-McCaffrey degrees of freedom (interactions independent within a user),
# what the gate took before: kept to re-run earlier decisions as they were
BM_METHOD = "clipped-is-user-cr2-bm-t"
BM_CENTRED_METHOD = "centred-is-user-cr2-bm-t"
PERCENTILE_METHOD = "clipped-is-user-bootstrap"  # the percentile user bootstrap before those
METHODS = (METHOD, CENTRED_METHOD, BM_METHOD, BM_CENTRED_METHOD, PERCENTILE_METHOD)
CENTRED_METHODS = (CENTRED_METHOD, BM_CENTRED_METHOD)
_MAX_LOG_WEIGHT = 700.0  # exp() of more overflows float64; such a weight fails the ESS limit
LEVEL = 0.95
RESAMPLES = 2000  # for PERCENTILE_METHOD only
WEIGHT_CAP = 10.0
_CHUNK = 250  # bootstrap resamples drawn at once
_WORST_GAIN = -1.0  # in shifted units: no gain between rewards in [0, 1] is below -1


@dataclass(frozen=True)
class Estimate:
    """A candidate's estimated reward on the behaviour policy's held-out interactions."""

    value: float  # importance-sampling estimate of the candidate's mean reward (see method)
    # the parent's value: the mean reward of the scored interactions it served, or where an
    # earlier checkpoint served some of them, its own off-policy estimate (both arms)
    behaviour_mean: float
    ess: float  # effective sample size of the weights the estimate used, in (0, n]
    kl: float  # mean -log w: KL(behaviour || candidate); from the parent where it did not serve
    n: int  # interactions used
    users: int  # independent units (users; see user_key)
    lower: float = float("nan")  # one-sided lower confidence bound of the gain at ``level``
    level: float = LEVEL
    method: str = METHOD
    resamples: int = 0  # bootstrap resamples (PERCENTILE_METHOD; 0 for METHOD)
    clipped: int = 0  # interactions whose weight exceeded the cap (0: CENTRED_METHOD clips none)
    df: float = float("nan")  # the bound's degrees of freedom (NaN for the percentile bootstrap)
    censored: int = 0  # interactions without a reward (null: no outcome), kept in the evidence
    within_user_rho: float = float("nan")  # the degrees of freedom's bound of that correlation
    reward_min: float = float("nan")  # the reward range the rewards were shifted by
    reward_max: float = float("nan")

    @property
    def gain(self) -> float:
        """Estimated reward of the candidate minus that of the serving policy."""
        return self.value - self.behaviour_mean


def user_key(user_id: str | None, session_id: str | None, interaction_id: str,
             org_id: str | None = None) -> str:  # fmt: skip
    """The unit an interaction is resampled and held out with: its user; without one its
    session; without either the interaction alone. Ids are the client's, unique only within
    an organisation: with an ``org_id`` the unit is the organisation's (its length first, so no
    pair of ids spells another pair's key); without one (evidence written before organisations
    were recorded) the key is the id alone, as it was.

    >>> user_key("u1", "s1", "i1"), user_key(None, "s1", "i1"), user_key("", None, "i1")
    ('user:u1', 'session:s1', 'interaction:i1')
    >>> user_key("u1", None, "i1", "acme"), user_key(None, None, "i1", "acme")
    ('4:acme/user:u1', '4:acme/interaction:i1')
    """
    if user_id:
        unit = f"user:{user_id}"
    elif session_id:
        unit = f"session:{session_id}"
    else:
        unit = f"interaction:{interaction_id}"
    return scoped_key(org_id or None, unit)


def sequence_log_weights(behaviour: Sequence[Sequence[float]],
                         candidate: Sequence[Sequence[float]]) -> np.ndarray:  # fmt: skip
    """Per interaction, ``sum_t candidate_logprob - behaviour_logprob`` over its tokens."""
    if len(behaviour) != len(candidate):
        raise ValueError("one candidate log-prob list per behaviour log-prob list")
    out = np.empty(len(behaviour))
    for i, (b, c) in enumerate(zip(behaviour, candidate, strict=True)):
        if len(b) != len(c):
            raise ValueError(f"interaction {i}: {len(b)} behaviour log-probs, {len(c)} candidate")
        out[i] = math.fsum(c) - math.fsum(b)
    return out


def estimate_gain(users: Sequence[str] | np.ndarray,
                  rewards: Sequence[float | None] | np.ndarray,
                  log_weights: Sequence[float] | np.ndarray, *, level: float = LEVEL,
                  reward_min: float, reward_max: float, resamples: int = RESAMPLES,
                  seed: int = 0, weight_cap: float = WEIGHT_CAP, method: str = METHOD,
                  bound: bool = True,
                  parent_log_weights: Sequence[float] | np.ndarray | None = None,
                  ) -> Estimate:  # fmt: skip
    """The estimate and its user-level lower bound from each interaction's user key, reward and
    sequence log-weight, with rewards in ``[reward_min, reward_max]`` (see the module's
    docstring). ``bound=False`` gives the point estimate alone; ``resamples`` and ``seed`` are
    the percentile bootstrap's (``METHOD`` is the same for every seed; with ``PERCENTILE_METHOD``
    and ``resamples=0`` there is no bound either). ``parent_log_weights``: each interaction's
    sequence log-weight of the parent against its behaviour, where an earlier checkpoint served
    some (0 where the parent did): both arms off-policy, centred methods only.

    >>> same = estimate_gain(["a", "a", "b", "c"] * 10, [0.0, 1.0] * 20, [0.0] * 40,
    ...                      reward_min=0.0, reward_max=1.0)
    >>> same.gain == 0.0, same.lower <= 0.0, same.users, round(same.ess)
    (True, True, 3, 40)
    >>> alone = estimate_gain(["a"] * 40, [0.0, 1.0] * 20, [0.0, 0.5] * 20,
    ...                       reward_min=0.0, reward_max=1.0)  # one user: the worst gain
    >>> round(alone.gain, 3), alone.lower, alone.df != alone.df
    (0.324, -1.0, True)
    """
    n = len(rewards)
    if n == 0 or len(users) != n or len(log_weights) != n:
        raise ValueError("one user and one log-weight per reward, at least one")
    if not 0 < level < 1 or resamples < 0 or not weight_cap >= 1:
        raise ValueError("level in (0, 1), resamples >= 0, weight_cap >= 1")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not (math.isfinite(reward_min) and math.isfinite(reward_max) and reward_min < reward_max):
        raise ValueError(f"reward range [{reward_min}, {reward_max}] must be finite and not empty")
    scored = np.array([v is not None for v in rewards], dtype=bool)
    r = np.array([0.0 if v is None else v for v in rewards], dtype=np.float64)
    outside = int(np.count_nonzero(scored & ((r < reward_min) | (r > reward_max)
                                             | ~np.isfinite(r))))  # fmt: skip
    if outside:
        raise ValueError(
            f"{outside} reward(s) outside the stated range [{reward_min}, {reward_max}]: "
            "the bound holds only for rewards inside it"
        )
    if not scored.any():
        raise ValueError("no scored interaction (every reward null): nothing to estimate")
    log_w = np.asarray(log_weights, dtype=np.float64)
    if not np.all(np.isfinite(log_w)):
        raise ValueError("log-weights must be finite")
    span = reward_max - reward_min
    centred = method in CENTRED_METHODS
    used_log_w = (np.minimum(log_w, _MAX_LOG_WEIGHT) if centred
                  else np.minimum(log_w, math.log(weight_cap)))  # fmt: skip
    w = np.exp(used_log_w)
    w_parent, kl = None, float(-used_log_w.mean())
    if parent_log_weights is not None:
        log_p = np.minimum(np.asarray(parent_log_weights, dtype=np.float64), _MAX_LOG_WEIGHT)
        if len(log_p) != n or not np.all(np.isfinite(log_p)):
            raise ValueError("one finite parent log-weight per reward")
        w_parent = np.exp(log_p)
        # KL(parent || candidate), weighted to the parent: the served policy's distance the
        # limit is for (from the earlier checkpoint it would count the parent's step too)
        kl = float(np.sum(w_parent * (log_p - used_log_w)) / np.sum(w_parent))
    value, behaviour, pseudo = _censored_ratio(w, np.where(scored, (r - reward_min) / span, 0.0),
                                               scored.astype(np.float64), centred,
                                               w_parent)  # fmt: skip
    keys, unit = np.unique(np.asarray(users), return_inverse=True)
    groups = len(keys)
    diff = np.bincount(unit, weights=pseudo, minlength=groups)
    squares = np.bincount(unit, weights=pseudo * pseudo, minlength=groups)
    sizes = np.bincount(unit, minlength=groups).astype(np.float64)
    lower = df = rho = float("nan")
    if bound and (resamples or method != PERCENTILE_METHOD):
        rho = within_user_correlation_bound(diff, squares, sizes)
        lower, df = _lower_bound(diff, sizes, level, resamples, seed, method, rho)
        lower = max(float(lower), _WORST_GAIN) * span
    return Estimate(
        value=reward_min + span * value,
        behaviour_mean=reward_min + span * behaviour,
        ess=float(w.sum() ** 2 / (w * w).sum()),
        kl=kl,
        n=n,
        users=groups,
        lower=lower,
        level=level,
        method=method,
        resamples=resamples if method == PERCENTILE_METHOD else 0,
        df=df,
        reward_min=reward_min,
        reward_max=reward_max,
        clipped=0 if centred else int(np.count_nonzero(log_w > math.log(weight_cap))),
        censored=n - int(scored.sum()),
        within_user_rho=rho,
    )


def _censored_ratio(w: np.ndarray, reward: np.ndarray, scored: np.ndarray, centred: bool,
                    w_parent: np.ndarray | None = None
                    ) -> tuple[float, float, np.ndarray]:  # fmt: skip
    """The candidate's value ``V_c = E_c[r' 1_S] / max(P_c(S), P_p(S))`` and the parent's
    ``V_p = E_p[r' 1_S] / P_p(S)`` in shifted units, with each interaction's pseudo-value
    ``gain + psi_i``: ``psi`` the ratios' linearisation (influence), centred, so that the pseudo-
    values average the gain and their user sums carry its CR2 variance (module docstring).
    ``reward`` is ``r' 1_S`` (0 where censored), ``scored`` is ``1_S``. ``w_parent``: the
    parent's weights where it is not the behaviour (:func:`estimate_gain`); None, the parent
    served every row and its value is its plain scored mean."""
    p_b = float(scored.mean())
    m_b = float(reward.mean())
    if centred:
        # E[w] = 1 as control variate for both the numerator and P(S); the mass the sample
        # missed (mean w < 1) is credited as scored at the worst reward for the candidate, at
        # the best for the parent: either way the gain can only fall
        a, d, numerator, denominator = _centred_arm(w, reward, scored, m_b, p_b, worst=True)
        if w_parent is None:
            a_p, d_p, num_p, den_p = reward, scored, m_b, p_b
        else:
            a_p, d_p, num_p, den_p = _centred_arm(w_parent, reward, scored, m_b, p_b, worst=False)
    else:
        if w_parent is not None:
            raise ValueError("a parent that did not serve the rows needs the centred method")
        # clipping lowers w r' 1_S and w 1_not-S: the numerator falls, the denominator
        # (1 - E_b[w 1_not-S]) rises, so the clip can only lower the value
        a = w * reward
        d = 1.0 - w * (1.0 - scored)
        numerator, denominator = float(a.mean()), float(d.mean())
        a_p, d_p, num_p, den_p = reward, scored, m_b, p_b
    if denominator < den_p:  # more censored under the candidate: the excess counts at r' = 0
        denominator, d = den_p, d_p
    value, parent = numerator / denominator, num_p / den_p
    psi = (a - value * d) / denominator - (a_p - parent * d_p) / den_p
    return value, parent, (value - parent) + (psi - psi.mean())


def _centred_arm(w: np.ndarray, reward: np.ndarray, scored: np.ndarray, m_b: float, p_b: float,
                 worst: bool) -> tuple[np.ndarray, np.ndarray, float, float]:  # fmt: skip
    """One arm's centred terms, numerator and denominator (:func:`_censored_ratio`); the mass
    the sample missed counted scored, at the worst reward (r' = 0) or the best (1)."""
    missed = max(0.0, 1.0 - float(w.mean()))
    a = reward + (w - 1) * (reward - m_b)
    d = scored + (w - 1) * (scored - p_b)
    credit = 0.0 if worst else 1.0
    return a, d, float(a.mean()) + (credit - m_b) * missed, float(d.mean()) + (1 - p_b) * missed


def _lower_bound(diff: np.ndarray, sizes: np.ndarray, level: float, resamples: int, seed: int,
                 method: str, rho: float = 1.0) -> tuple[float, float]:  # fmt: skip
    """The gain's one-sided lower bound in shifted units (rewards in [0, 1]) and its degrees of
    freedom (NaN for the percentile bootstrap), from each user's sum of ``w~ r' - r'`` and
    count of interactions (see the module's docstring)."""
    groups = len(diff)
    total = sizes.sum()
    gain = diff.sum() / total
    if method == PERCENTILE_METHOD:
        rng = np.random.default_rng(seed)
        gains = []
        for start in range(0, resamples, _CHUNK):
            drawn = rng.integers(0, groups, size=(min(_CHUNK, resamples - start), groups))
            gains.append(diff[drawn].sum(1) / sizes[drawn].sum(1))
        return float(np.quantile(np.concatenate(gains), 1 - level)), math.nan
    if groups < 2:
        return _WORST_GAIN, math.nan  # one user says nothing about how users differ
    share = sizes / total  # each user's leverage
    residual = diff - gain * sizes
    se = math.sqrt(float(np.sum(residual * residual / (1 - share)))) / total
    df = bell_mccaffrey_df(share)
    if method not in (BM_METHOD, BM_CENTRED_METHOD):
        df = min(df, imbens_kolesar_df(share, sizes, rho))
    return max(float(gain) - t_quantile(level, df) * se, _WORST_GAIN), df
