"""Off-policy evaluation: a candidate checkpoint's expected reward, estimated from the rollouts
its parent served, before any user sees the candidate.

Self-normalised importance sampling: each rollout's reward is weighted by how much more (or less)
likely the candidate was to produce that completion than the serving policy, ``w = exp(sum of
logp_candidate - sum of logp_behaviour)``, and the weights are normalised to sum to one. The
normalisation costs a little bias and buys a bounded estimate (a convex mix of observed rewards),
which plain importance sampling does not give. Weights are normalised in log space (a softmax),
since products of many token probabilities under- and overflow.

The estimate is only as good as the overlap of the two policies; the effective sample size
``(sum w)^2 / sum w^2`` and the KL estimate say how much that is, and the gate reads both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainer.examples import Example
from trainer.learner import score_examples
from trainer.policy import CausalLMPolicy


@dataclass(frozen=True)
class Estimate:
    """A candidate's estimated reward on the behaviour policy's rollouts."""

    value: float  # self-normalised importance-sampling estimate of the candidate's mean reward
    behaviour_mean: float  # plain mean reward of the rollouts (the serving policy's)
    ess: float  # effective sample size of the weights, in (0, n]
    kl: float  # mean over rollouts of sum(logp_behaviour - logp_candidate): KL(behaviour||cand.)
    n: int  # rollouts used

    @property
    def gain(self) -> float:
        """Estimated reward of the candidate minus that of the serving policy."""
        return self.value - self.behaviour_mean


@torch.no_grad()
def estimate(policy: CausalLMPolicy, examples: Sequence[Example]) -> Estimate:
    """The expected reward of ``policy`` estimated from ``examples`` (rollouts of another policy
    with their behaviour log-probabilities), without gradients. The candidate is scored under
    each rollout's own sampling transformation (temperature, nucleus), like the behaviour."""
    if not examples:
        raise ValueError("estimate needs at least one example")
    rewards = torch.tensor([e.reward for e in examples], dtype=torch.float64)
    scores = score_examples(policy, examples)
    log_weights = torch.tensor(
        [float((new.double() - torch.tensor(e.rollout.logprobs, dtype=torch.float64)).sum())
         for new, e in zip(scores, examples, strict=True)], dtype=torch.float64)
    weights = torch.softmax(log_weights, dim=0)  # normalised: sum w = 1
    return Estimate(
        value=float((weights * rewards).sum()),
        behaviour_mean=float(rewards.mean()),
        ess=float(1.0 / (weights * weights).sum()),
        kl=float(-log_weights.mean()),
        n=len(examples),
    )
