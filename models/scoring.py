"""Log-probabilities of recorded completions under a policy, as the learner and the gate read them.

The learner scores its shard before and after each update; the gate scores held-out
interactions under the candidate. Both go through :func:`score_rows`, so that a completion is
scored the one way: with the temperature and top-p it was sampled with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from models.examples import Example
from models.policy import CausalLMPolicy


def by_length(examples: Sequence[Example], rows: Iterable[int]) -> list[int]:
    """``rows`` ordered by their prompt + completion length, so that a micro-batch of
    neighbours pads little (in random order a code-world batch padded 22 % of its positions,
    in this one under 1 %).

    >>> from types import SimpleNamespace as NS
    >>> ex = [NS(rollout=NS(prompt_ids=[1] * n, completion_ids=[2])) for n in (5, 1, 3)]
    >>> by_length(ex, [0, 1, 2])
    [1, 2, 0]
    """
    return sorted(rows, key=lambda i: len(examples[i].rollout.prompt_ids)
                  + len(examples[i].rollout.completion_ids))  # fmt: skip


@torch.no_grad()
def score_rows(
    policy: CausalLMPolicy, examples: Sequence[Example], rows: Sequence[int], micro_batch: int
) -> dict[int, torch.Tensor]:
    """Per example (by index), its completion's log-probabilities under the policy now."""
    out: dict[int, torch.Tensor] = {}
    unique = by_length(examples, dict.fromkeys(rows))
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
