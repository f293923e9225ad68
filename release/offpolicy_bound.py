"""The gate's statistics: a candidate's gain over the served policy, and a lower bound of it
that stays valid on traffic as it comes. Pure numpy: no torch, no polars, so the decision can be
recomputed from an evidence file anywhere (``rtrl gate evaluate``) and calibrated on simulated
worlds (``tests/release``).

**The estimator.** Each held-out interaction ``i`` was served by the behaviour policy; its
sequence weight ``w_i = exp(sum_t log p_candidate - log p_behaviour)`` is clipped at ``cap``,
``w~_i = min(w_i, cap)``, and its reward is shifted into ``[0, 1]`` by the known range of the
reward, ``r'_i = (r_i - r_min) / (r_max - r_min)``. The candidate's value is the plain (not
self-normalised) mean ``sum w~ r' / n``, the behaviour's the plain mean ``sum r' / n``. Because
``r' >= 0``, clipping a weight only removes mass: the clipped mean is at most the unclipped one
for every sample, and every bootstrap resample below, so the clip can only lower the estimate and
its bound, never lift them. The same holds for completions the candidate would make and the
behaviour never could (top-p cuts them from its support): their mass is missing, and missing mass
on non-negative rewards is a loss too. Self-normalising would break both: dividing by
``sum w~`` gives back the mass a clip removed, spread over the other completions, which is how a
per-token cap of 2 once turned a candidate that piles onto a disliked completion (served 2 %,
candidate 42 %) into an estimated gain. The price is variance from the shift; the estimator never
leans toward promoting.

**The unit is the user.** One user's interactions share their taste and are dependent; users are
the independent draws. The lower bound is a cluster bootstrap: users are resampled with
replacement (each resample weighs every user by how often it was drawn, all of its interactions
together), the gain recomputed as a ratio of user sums, and the ``1 - level`` quantile taken. An
interaction without a user id is keyed by its session id when it has one, else it is its own user
(:func:`user_key`): the conservative choice would be impossible (no id), and a session is at least
as dependent as a user's interactions within it.

**Diagnostics on the same weights.** ESS ``(sum w~)^2 / sum w~^2`` and the KL estimate
``mean(-log w~)`` (an estimate of KL(behaviour || candidate) per interaction) use the clipped
weights the estimate uses; the clip can only raise this KL estimate, so its limit is not loosened
by the clip. ``clipped`` counts the interactions whose weight was cut.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

METHOD = "clipped-is-user-bootstrap"
LEVEL = 0.95
RESAMPLES = 2000
WEIGHT_CAP = 10.0
# reward v1's range with its default configuration (shared/spec/reward-v1.md): the best is an
# accepted, fully retained edit (1 + 1), the worst an empty window with the floors of the
# follow-up, invalid-tool-call, clarifying and latency terms (-1 - 2 - 1 - 0.1)
REWARD_MIN = -4.1
REWARD_MAX = 2.0
_CHUNK = 250  # bootstrap resamples drawn at once


@dataclass(frozen=True)
class Estimate:
    """A candidate's estimated reward on the behaviour policy's held-out interactions."""

    value: float  # clipped importance-sampling estimate of the candidate's mean reward
    behaviour_mean: float  # plain mean reward of the interactions (the serving policy's)
    ess: float  # effective sample size of the clipped weights, in (0, n]
    kl: float  # mean over interactions of -log w~: KL(behaviour || candidate), clipped weights
    n: int  # interactions used
    users: int  # independent units (users; see user_key)
    lower: float = float("nan")  # one-sided lower confidence bound of the gain at ``level``
    level: float = LEVEL
    method: str = METHOD
    resamples: int = 0
    clipped: int = 0  # interactions whose weight exceeded the cap

    @property
    def gain(self) -> float:
        """Estimated reward of the candidate minus that of the serving policy."""
        return self.value - self.behaviour_mean


def user_key(user_id: str | None, session_id: str | None, interaction_id: str) -> str:
    """The unit an interaction is resampled and held out with: its user; without one its
    session; without either the interaction alone.

    >>> user_key("u1", "s1", "i1"), user_key(None, "s1", "i1"), user_key("", None, "i1")
    ('user:u1', 'session:s1', 'interaction:i1')
    """
    if user_id:
        return f"user:{user_id}"
    if session_id:
        return f"session:{session_id}"
    return f"interaction:{interaction_id}"


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


def estimate_gain(users: Sequence[str] | np.ndarray, rewards: Sequence[float] | np.ndarray,
                  log_weights: Sequence[float] | np.ndarray, *, level: float = LEVEL,
                  resamples: int = RESAMPLES, seed: int = 0, weight_cap: float = WEIGHT_CAP,
                  reward_min: float = REWARD_MIN,
                  reward_max: float = REWARD_MAX) -> Estimate:  # fmt: skip
    """The estimate and its user-level lower bound from each interaction's user key, reward and
    sequence log-weight (see the module's docstring). Deterministic for a given ``seed``.

    >>> same = estimate_gain(["a", "a", "b", "c"] * 10, [0.0, 1.0] * 20, [0.0] * 40,
    ...                      reward_min=0.0, reward_max=1.0)
    >>> same.gain == 0.0, same.lower <= 0.0, same.users, round(same.ess)
    (True, True, 3, 40)
    """
    n = len(rewards)
    if n == 0 or len(users) != n or len(log_weights) != n:
        raise ValueError("one user and one log-weight per reward, at least one")
    if not 0 < level < 1 or resamples < 0 or not weight_cap >= 1:
        raise ValueError("level in (0, 1), resamples >= 0, weight_cap >= 1")
    if not (math.isfinite(reward_min) and math.isfinite(reward_max) and reward_min < reward_max):
        raise ValueError(f"reward range [{reward_min}, {reward_max}] must be finite and not empty")
    r = np.asarray(rewards, dtype=np.float64)
    outside = int(np.count_nonzero((r < reward_min) | (r > reward_max) | ~np.isfinite(r)))
    if outside:
        raise ValueError(
            f"{outside} reward(s) outside the stated range [{reward_min}, {reward_max}]: "
            "the bound holds only for rewards inside it"
        )
    log_w = np.asarray(log_weights, dtype=np.float64)
    if not np.all(np.isfinite(log_w)):
        raise ValueError("log-weights must be finite")
    span = reward_max - reward_min
    shifted = (r - reward_min) / span
    clipped_log_w = np.minimum(log_w, math.log(weight_cap))
    w = np.exp(clipped_log_w)
    keys, unit = np.unique(np.asarray(users), return_inverse=True)
    groups = len(keys)
    weighted = np.bincount(unit, weights=w * shifted, minlength=groups)
    plain = np.bincount(unit, weights=shifted, minlength=groups)
    sizes = np.bincount(unit, minlength=groups).astype(np.float64)
    value = float(weighted.sum() / n)
    behaviour = float(plain.sum() / n)
    lower = float("nan")
    if resamples:
        rng = np.random.default_rng(seed)
        diff = weighted - plain
        gains = []
        for start in range(0, resamples, _CHUNK):
            drawn = rng.integers(0, groups, size=(min(_CHUNK, resamples - start), groups))
            gains.append(diff[drawn].sum(1) / sizes[drawn].sum(1))
        lower = float(np.quantile(np.concatenate(gains), 1 - level)) * span
    return Estimate(
        value=reward_min + span * value,
        behaviour_mean=reward_min + span * behaviour,
        ess=float(w.sum() ** 2 / (w * w).sum()),
        kl=float(-clipped_log_w.mean()),
        n=n,
        users=groups,
        lower=lower,
        level=level,
        method=METHOD,
        resamples=resamples,
        clipped=int(np.count_nonzero(log_w > math.log(weight_cap))),
    )
