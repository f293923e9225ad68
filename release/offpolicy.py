"""Off-policy evaluation: a candidate checkpoint's expected reward, estimated from the rollouts
its parent served, before any user sees the candidate, with a lower confidence bound.

Self-normalised importance sampling: each rollout's reward is weighted by how much more (or less)
likely the candidate was to produce that completion than the serving policy, and the weights are
normalised to sum to one. The weight of a completion is a product over its tokens of the ratio
``p_candidate / p_behaviour``, each ratio truncated at ``tis_cap``: untruncated, one long
completion's product can take all the weight and leave an effective sample size of one. The
normalisation costs a little bias and buys a bounded estimate (a convex mix of observed rewards).

The decision is taken on the gain's one-sided lower confidence bound, from a bootstrap over
interactions (the estimate recomputed on resampled interactions, the candidate's weights and the
behaviour's plain mean together, so their correlation is kept). When the rewards carry no
signal, every candidate's true gain is 0 and the bound exceeds 0 with probability about
``1 - level``; ``tests/release/test_offpolicy.py`` measures that rate. The effective sample size
``(sum w)^2 / sum w^2`` and the KL estimate say how much the two policies overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from models.examples import Example
from models.policy import CausalLMPolicy
from models.scoring import score_examples

METHOD = "snis-tis-bootstrap"
LEVEL = 0.95
RESAMPLES = 2000
TIS_CAP = 2.0


@dataclass(frozen=True)
class Estimate:
    """A candidate's estimated reward on the behaviour policy's rollouts."""

    value: float  # self-normalised importance-sampling estimate of the candidate's mean reward
    behaviour_mean: float  # plain mean reward of the rollouts (the serving policy's)
    ess: float  # effective sample size of the weights, in (0, n]
    kl: float  # mean over rollouts of sum(logp_behaviour - logp_candidate): KL(behaviour||cand.)
    n: int  # rollouts used
    lower: float = float("nan")  # one-sided lower confidence bound of the gain at ``level``
    level: float = LEVEL
    method: str = METHOD
    resamples: int = 0

    @property
    def gain(self) -> float:
        """Estimated reward of the candidate minus that of the serving policy."""
        return self.value - self.behaviour_mean


def snis_with_bound(log_ratios: Sequence[np.ndarray], rewards: Sequence[float], *,
                    tis_cap: float = TIS_CAP, level: float = LEVEL, resamples: int = RESAMPLES,
                    seed: int = 0) -> Estimate:  # fmt: skip
    """The estimate from per-token log-ratios ``log p_candidate - log p_behaviour`` of each
    rollout and its reward; pure (numpy), so its coverage can be measured on simulated data.

    >>> same = snis_with_bound([np.zeros(3)] * 50, [float(i % 2) for i in range(50)])
    >>> same.value == same.behaviour_mean, same.lower <= 0, round(same.ess)
    (True, True, 50)
    """
    n = len(rewards)
    if n == 0 or len(log_ratios) != n:
        raise ValueError("one reward per rollout, at least one")
    if not 0 < level < 1 or tis_cap < 1 or resamples < 0:
        raise ValueError("level in (0, 1), tis_cap >= 1, resamples >= 0")
    r = np.asarray(rewards, dtype=np.float64)
    cap = math.log(tis_cap)
    log_w = np.array([float(np.minimum(lr, cap).sum()) for lr in log_ratios])
    kl = float(-np.mean([float(np.sum(lr)) for lr in log_ratios]))
    w = np.exp(log_w - log_w.max())
    value = float((w * r).sum() / w.sum())
    ess = float(w.sum() ** 2 / (w * w).sum())
    lower = float("nan")
    if resamples:
        rng = np.random.default_rng(seed)
        gains = []
        for start in range(0, resamples, 250):
            idx = rng.integers(0, n, size=(min(250, resamples - start), n))
            wi, ri = w[idx], r[idx]
            gains.append((wi * ri).sum(1) / wi.sum(1) - ri.mean(1))
        lower = float(np.quantile(np.concatenate(gains), 1 - level))
    return Estimate(
        value=value,
        behaviour_mean=float(r.mean()),
        ess=ess,
        kl=kl,
        n=n,
        lower=lower,
        level=level,
        method=METHOD,
        resamples=resamples,
    )


@torch.no_grad()
def estimate(
    policy: CausalLMPolicy,
    examples: Sequence[Example],
    *,
    tis_cap: float = TIS_CAP,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Estimate:
    """The expected reward of ``policy`` estimated from ``examples`` (rollouts of another policy
    with their behaviour log-probabilities), without gradients. The candidate is scored under
    each rollout's own sampling transformation (temperature, nucleus), like the behaviour."""
    if not examples:
        raise ValueError("estimate needs at least one example")
    scores = score_examples(policy, examples)
    log_ratios = [
        new.double().numpy() - np.asarray(e.rollout.logprobs, dtype=np.float64)
        for new, e in zip(scores, examples, strict=True)
    ]
    return snis_with_bound(
        log_ratios,
        [e.reward for e in examples],
        tis_cap=tis_cap,
        level=level,
        resamples=resamples,
        seed=seed,
    )
