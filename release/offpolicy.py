"""Off-policy evaluation's model side: a candidate checkpoint scores the completions its parent
served, and the held-out interactions become the gate's evidence (``release.evidence``), before
any user sees the candidate.

The candidate scores each completion under the rollout's own sampling transformation
(temperature, nucleus), like the behaviour log-probabilities were recorded. The statistics (a
clipped importance-sampling estimate and its user-level lower bound) are
``release.offpolicy_bound``'s, apart from torch, so that ``rtrl gate evaluate`` recomputes a
decision from its evidence file alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from models.examples import Example, trajectories
from models.policy import CausalLMPolicy
from models.scoring import score_examples
from release.evidence import EvidenceRow, estimate_rows
from release.offpolicy_bound import LEVEL, RESAMPLES, WEIGHT_CAP, Estimate
from rewards.config import RewardConfig


@torch.no_grad()
def evidence_rows(policy: CausalLMPolicy, examples: Sequence[Example],
                  parent_scores: Sequence[torch.Tensor] | None = None
                  ) -> list[EvidenceRow]:  # fmt: skip
    """One row per held-out interaction, with its completions' log-probabilities under
    ``policy``. The calls of an agent run (examples of one interaction, each with its
    ``rollout.turn``) make one row: their tokens' log-probabilities one after the other, so the
    row's sequence weight is the product of the calls' weights and the ESS counts trajectories,
    not calls; its reward is the trajectory's. ``parent_scores``: each example's tokens scored
    by the parent, where an earlier checkpoint served them (the rows' ``parent_logprobs``)."""
    scores = score_examples(policy, examples)
    rows = []
    for members in trajectories(examples):
        first = examples[members[0]]
        rows.append(EvidenceRow(
            user_id=first.user_id,
            interaction_id=first.rollout.interaction_id,
            reward=first.reward,
            behaviour_logprobs=tuple(float(v) for i in members
                                     for v in examples[i].rollout.logprobs),
            candidate_logprobs=tuple(float(v) for i in members
                                     for v in scores[i].double().tolist()),
            session_id=first.session_id,
            full_support=all(examples[i].rollout.sampling.top_p >= 1.0 for i in members),
            org_id=first.org_id,
            parent_logprobs=None if parent_scores is None else tuple(
                float(v) for i in members for v in parent_scores[i].double().tolist()),
        ))  # fmt: skip
    return rows


def estimate(policy: CausalLMPolicy, examples: Sequence[Example], *, level: float = LEVEL,
             resamples: int = RESAMPLES, seed: int = 0, weight_cap: float = WEIGHT_CAP,
             reward_min: float | None = None,
             reward_max: float | None = None) -> Estimate:  # fmt: skip
    """The expected reward of ``policy`` estimated from ``examples`` (rollouts of another policy
    with their behaviour log-probabilities); the reward range defaults to reward v1's default
    configuration's (``RewardConfig.reward_range``)."""
    if not examples:
        raise ValueError("estimate needs at least one example")
    default_min, default_max = RewardConfig().reward_range()
    reward_min = default_min if reward_min is None else reward_min
    reward_max = default_max if reward_max is None else reward_max
    return estimate_rows(evidence_rows(policy, examples), level=level, resamples=resamples,
                         seed=seed, weight_cap=weight_cap, reward_min=reward_min,
                         reward_max=reward_max)  # fmt: skip
