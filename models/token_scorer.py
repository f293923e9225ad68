"""A causal language model's log-probabilities of given tokens, with gradients when training.

Scoring right-pads prompt + completion (``score_batch``) and reads only the completion's
positions. The vocabulary projection and its log-softmax run in chunks of positions (and, with
gradients, are recomputed in the backward pass), so a 50k-token vocabulary never needs a
``[batch, length, vocab]`` tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from models.sampling import sampling_log_probs

SCORE_CHUNK = 1024  # positions per vocabulary projection (1024 x 49k floats = 200 MB)


class TokenScorer(nn.Module):
    """The model's log-probabilities of target tokens, as a module, so that a distributed
    wrapper (DDP through accelerate) sees the whole computation in its ``forward``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model: Any = model  # a transformers (or peft) model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                positions: torch.Tensor, targets: torch.Tensor, temperature: torch.Tensor,
                top_p: torch.Tensor, allowed: torch.Tensor | None = None
                ) -> torch.Tensor:  # fmt: skip
        """``positions``/``targets`` ``[N]`` (flat, into ``[B*L]``): the log-probability of
        ``targets[i]`` given everything up to ``positions[i]``; ``temperature``/``top_p`` per
        target, ``allowed`` (packed grammar masks ``[N, W]``, or None) too."""
        core = core_model(self.model)
        hidden = core.get_decoder()(
            input_ids=input_ids, attention_mask=attention_mask
        ).last_hidden_state
        flat = hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions)
        head = core.get_output_embeddings()
        pieces = []
        for start in range(0, flat.shape[0], SCORE_CHUNK):
            part = slice(start, start + SCORE_CHUNK)
            mask = None if allowed is None else allowed[part]
            args = (flat[part], targets[part], temperature[part], top_p[part], mask)
            if torch.is_grad_enabled():
                pieces.append(checkpoint(_chunk_logprobs, head, *args, use_reentrant=False))
            else:
                pieces.append(_chunk_logprobs(head, *args))
        return torch.cat(pieces) if pieces else flat.new_zeros(0)


def _chunk_logprobs(
    head: nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    allowed: torch.Tensor | None,
) -> torch.Tensor:
    log_dist = sampling_log_probs(
        head(hidden), temperature.unsqueeze(-1), top_p.unsqueeze(-1), allowed
    )
    return log_dist.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def core_model(model: Any) -> Any:
    """The transformers model inside a peft wrapper (its LoRA layers are injected in place)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@dataclass(frozen=True)
class ScoreBatch:
    """Right-padded prompt + completion rows and where their completion tokens are."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    positions: torch.Tensor  # [N] flat index of the position predicting each completion token
    targets: torch.Tensor  # [N]
    lengths: tuple[int, ...]  # completion tokens per row (sum = N)


def score_batch(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device | str = "cpu",
) -> ScoreBatch:
    """
    >>> b = score_batch([[5, 6], [7]], [[8], [9, 10]], pad_id=0)
    >>> b.input_ids.tolist(), b.positions.tolist(), b.targets.tolist()
    ([[5, 6, 8], [7, 9, 10]], [1, 3, 4], [8, 9, 10])
    """
    if len(prompts) != len(completions):
        raise ValueError("one completion per prompt")
    rows = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    positions: list[int] = []
    targets: list[int] = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        if not prompt or not completion:
            raise ValueError(f"row {i}: prompt and completion must be non-empty")
        ids[i, : len(rows[i])] = torch.tensor(rows[i])
        mask[i, : len(rows[i])] = 1
        start = i * width + len(prompt) - 1
        positions.extend(range(start, start + len(completion)))
        targets.extend(completion)
    return ScoreBatch(
        ids.to(device),
        mask.to(device),
        torch.tensor(positions, device=device),
        torch.tensor(targets, device=device),
        tuple(len(c) for c in completions),
    )
