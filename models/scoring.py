"""Log-probabilities of recorded completions under a policy, as the learner and the gate read them.

The learner scores its shard before and after each update; the gate scores held-out
interactions under the candidate. Both go through :func:`score_rollouts` (the learner's update
step directly, with gradients; everything else through :func:`score_rows`), so that a
completion is scored the one way: with the temperature and top-p it was sampled with, under the
grammar masks it was sampled under (its constraint, replayed over its tokens). A constraint that
cannot be replayed raises ``models.constraint.ConstraintNotReplayable`` (reason
``constraint_not_replayable``): scoring it without its masks would score another distribution.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn

from models.examples import Example
from models.policy import CausalLMPolicy
from models.rollout import Rollout


def by_length(examples: Sequence[Example], rows: Iterable[int]) -> list[int]:
    """``rows`` ordered by their prompt + completion length, so that a micro-batch of
    neighbours pads little (in random order a code-world batch padded 22 % of its positions,
    in this one under 1 %); the calls of one interaction (an agent run) next to each other, at
    the length of its longest, so that a micro-batch scores a call inside the next call's
    sequence (``models.token_scorer.carriers``) instead of on its own.

    >>> from types import SimpleNamespace as NS
    >>> def ex(run, n):
    ...     return NS(rollout=NS(interaction_id=run, prompt_ids=[1] * n, completion_ids=[2]))
    >>> by_length([ex("a", 5), ex("b", 1), ex("c", 3)], [0, 1, 2])
    [1, 2, 0]
    >>> by_length([ex("a", 2), ex("b", 3), ex("a", 9), ex("c", 5), ex("a", 5)], range(5))
    [1, 3, 0, 4, 2]
    """
    rows = list(rows)

    def size(i: int) -> int:
        return len(examples[i].rollout.prompt_ids) + len(examples[i].rollout.completion_ids)

    longest: dict[str, int] = {}
    for i in rows:
        run = examples[i].rollout.interaction_id
        longest[run] = max(longest.get(run, 0), size(i))

    def key(i: int) -> tuple[int, str, int]:
        run = examples[i].rollout.interaction_id
        return longest[run], run, size(i)

    return sorted(rows, key=key)


def score_rollouts(
    policy: CausalLMPolicy, rollouts: Sequence[Rollout], scorer: nn.Module | None = None
) -> list[torch.Tensor]:
    """Each rollout's completion's log-probabilities under ``policy``, by how it was sampled;
    with gradients when grad mode is on (``scorer``: the policy's scorer as wrapped for
    training)."""
    return policy.score(
        [r.prompt_ids for r in rollouts],
        [r.completion_ids for r in rollouts],
        [r.sampling.temperature for r in rollouts],
        [r.sampling.top_p for r in rollouts],
        scorer=scorer,
        constraints=[r.constraint for r in rollouts],
    )


@torch.no_grad()
def score_rows(
    policy: CausalLMPolicy, examples: Sequence[Example], rows: Sequence[int], micro_batch: int
) -> dict[int, torch.Tensor]:
    """Per example (by index), its completion's log-probabilities under the policy now."""
    out: dict[int, torch.Tensor] = {}
    unique = by_length(examples, dict.fromkeys(rows))
    for start in range(0, len(unique), micro_batch):
        part = unique[start : start + micro_batch]
        scores = score_rollouts(policy, [examples[i].rollout for i in part])
        out.update(zip(part, scores, strict=True))
    return out


def score_examples(
    policy: CausalLMPolicy, examples: Sequence[Example], micro_batch: int = 8
) -> list[torch.Tensor]:
    """Every example's per-token log-probabilities under ``policy`` (no gradients)."""
    scored = score_rows(policy, examples, range(len(examples)), micro_batch)
    return [scored[i].cpu() for i in range(len(examples))]
