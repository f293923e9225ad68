"""Log-probabilities of recorded completions under a policy, as the learner and the gate read them.

The learner scores its shard before and after each update; the gate scores held-out
interactions under the candidate. Both go through :func:`score_rows`, so that a completion is
scored the one way: with the temperature and top-p it was sampled with.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from models.examples import Example
from models.policy import CausalLMPolicy


@torch.no_grad()
def score_rows(
    policy: CausalLMPolicy, examples: Sequence[Example], rows: Sequence[int], micro_batch: int
) -> dict[int, torch.Tensor]:
    """Per example (by index), its completion's log-probabilities under the policy now."""
    out: dict[int, torch.Tensor] = {}
    unique = list(dict.fromkeys(rows))
    for start in range(0, len(unique), micro_batch):
        part = unique[start : start + micro_batch]
        rollouts = [examples[i].rollout for i in part]
        scores = policy.score(
            [r.prompt_ids for r in rollouts],
            [r.completion_ids for r in rollouts],
            [r.sampling.temperature for r in rollouts],
            [r.sampling.top_p for r in rollouts],
        )
        out.update(zip(part, scores, strict=True))
    return out


def score_examples(
    policy: CausalLMPolicy, examples: Sequence[Example], micro_batch: int = 8
) -> list[torch.Tensor]:
    """Every example's per-token log-probabilities under ``policy`` (no gradients)."""
    scored = score_rows(policy, examples, range(len(examples)), micro_batch)
    return [scored[i].cpu() for i in range(len(examples))]
