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
    """Right-padded sequences and where each row's completion tokens are in them."""

    input_ids: torch.Tensor  # [S, L]: S sequences, S <= B rows (packed: ``carriers``)
    attention_mask: torch.Tensor  # [S, L]
    positions: torch.Tensor  # [N] flat index of the position predicting each completion token
    targets: torch.Tensor  # [N]
    lengths: tuple[int, ...]  # completion tokens per row (sum = N)


def carriers(rows: Sequence[Sequence[int]]) -> list[int]:
    """For each row (a prompt + completion), the row whose sequence it is scored in: itself, or a
    longer row it is a prefix of (packing).

    Why: an agent run's next call extends the last one (its prompt is the last prompt and
    answer, then the tool results), so scoring the run's last call reads every earlier call's
    tokens too, and a causal model's log-probability at a position depends only on what comes
    before it. Scored apart, a run of ``k`` calls costs the sum of its prompts; packed, its
    longest one. Only an exact prefix rides: a row that differs anywhere is its own sequence.

    >>> carriers([[1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 9], [1, 2]])
    [1, 1, 2, 1]
    """
    by_length = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    carrier = list(range(len(rows)))
    kept: list[int] = []  # rows scored as sequences of their own, longest first
    for i in by_length:
        row = tuple(rows[i])
        host = next((k for k in kept if tuple(rows[k][: len(row)]) == row), None)
        if host is None:
            kept.append(i)
        else:
            carrier[i] = host
    return carrier


def score_batch(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device | str = "cpu",
    pack: bool = True,
) -> ScoreBatch:
    """The rows as a padded batch; with ``pack``, a row that is a prefix of another is read
    from that one's sequence (``carriers``).

    >>> b = score_batch([[5, 6], [7]], [[8], [9, 10]], pad_id=0)
    >>> b.input_ids.tolist(), b.positions.tolist(), b.targets.tolist()
    ([[5, 6, 8], [7, 9, 10]], [1, 3, 4], [8, 9, 10])
    >>> b = score_batch([[5, 6], [5, 6, 8, 3]], [[8], [4]], pad_id=0)  # a call, then the next
    >>> b.input_ids.tolist(), b.positions.tolist(), b.targets.tolist()
    ([[5, 6, 8, 3, 4]], [1, 3], [8, 4])
    """
    if len(prompts) != len(completions):
        raise ValueError("one completion per prompt")
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        if not prompt or not completion:
            raise ValueError(f"row {i}: prompt and completion must be non-empty")
    rows = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
    carrier = carriers(rows) if pack else list(range(len(rows)))
    sequences = sorted(set(carrier))
    slot = {row: k for k, row in enumerate(sequences)}
    width = max(len(rows[i]) for i in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for k, i in enumerate(sequences):
        ids[k, : len(rows[i])] = torch.tensor(rows[i])
        mask[k, : len(rows[i])] = 1
    positions: list[int] = []
    targets: list[int] = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        start = slot[carrier[i]] * width + len(prompt) - 1
        positions.extend(range(start, start + len(completion)))
        targets.extend(completion)
    return ScoreBatch(
        ids.to(device),
        mask.to(device),
        torch.tensor(positions, device=device),
        torch.tensor(targets, device=device),
        tuple(len(c) for c in completions),
    )
