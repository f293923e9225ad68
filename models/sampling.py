"""Sampling parameters, and the one function that says which distribution a sampler draws from.

The behaviour log-probability a rollout records must be that of the distribution the token was
actually drawn from: at temperature ``T`` and nucleus ``top_p`` that is not the model's own
softmax. :func:`sampling_log_probs` is that distribution, used by the sampler to draw and record
and by the learner to score the same tokens under new weights, so that the importance ratio of
the first update step is exactly 1 and every later ratio compares like with like. Under a
decoding constraint (``models.constraint``) the grammar's mask comes first: the tokens it
refuses get probability 0 before the temperature and the nucleus are applied, in the sampler and
in scoring alike.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:  # imported where it is used: a gateway in front of an upstream has no torch
    import torch

LOGPROB_FLOOR = -1.0e4
"""A token outside the nucleus has probability 0; its log is clamped here so that sums and
ratios stay finite (``exp`` of it is 0 in float32)."""


class SamplingParams(BaseModel):
    """How one completion is sampled; recorded with its rollout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(1.0, gt=0, le=10, description="softmax temperature")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus: smallest set of tokens with "
                         "this much probability")  # fmt: skip
    max_tokens: int = Field(64, ge=1, le=32768, description="completion tokens at most")
    stop: tuple[str, ...] = Field(
        (),
        max_length=16,
        description="strings that end the completion (the tokens that made them are kept)",
    )

    @field_validator("temperature", "top_p")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be finite")
        return value

    @field_validator("stop")
    @classmethod
    def _non_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not s for s in value):
            raise ValueError("stop strings are non-empty")
        return value

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
        }


def unpack_mask(allowed: torch.Tensor, vocab: int) -> torch.Tensor:
    """The boolean ``[..., vocab]`` form of a packed mask ``int32 [..., ceil(vocab / 32)]``
    (llguidance's: bit ``j`` of word ``i`` allows token ``32 i + j``).

    >>> import torch
    >>> unpack_mask(torch.tensor([[5, -1]], dtype=torch.int32), 34).nonzero()[:, 1].tolist()
    [0, 2, 32, 33]
    """
    import torch

    shifts = torch.arange(32, dtype=torch.int32, device=allowed.device)
    bits = (allowed.unsqueeze(-1) >> shifts) & 1
    return bits.flatten(-2)[..., :vocab].bool()


def sampling_log_probs(
    logits: torch.Tensor,
    temperature: float | torch.Tensor,
    top_p: float | torch.Tensor,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Log-probabilities ``[..., V]`` of the distribution sampled from: ``logits`` less the
    tokens a grammar refuses (``allowed``, a packed mask ``[..., ceil(V / 32)]``, see
    :func:`unpack_mask`), ``/ temperature``, then restricted to the nucleus of ``top_p`` and
    renormalised. Differentiable in ``logits`` (the mask and the nucleus are choices, not
    functions with a gradient). ``temperature`` and ``top_p`` are numbers, or tensors ``[..., 1]``
    of one value per row. A token the grammar forces (the only one allowed) has log-probability
    exactly 0.

    >>> import torch
    >>> logits = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    >>> [round(p, 6) for p in sampling_log_probs(logits, 1.0, 1.0).exp().tolist()]
    [0.5, 0.3, 0.2]
    >>> sampling_log_probs(logits, 1.0, 0.7).exp().tolist()  # {0.5, 0.3} hold 0.8 >= 0.7
    [0.625, 0.375, 0.0]
    >>> only_1 = torch.tensor([0b010], dtype=torch.int32)
    >>> sampling_log_probs(logits, 0.7, 0.9, only_1)[1].item()
    0.0
    """
    import torch

    scaled = logits.float()
    if allowed is not None:
        scaled = scaled.masked_fill(~unpack_mask(allowed, scaled.shape[-1]), float("-inf"))
    if isinstance(temperature, torch.Tensor) or temperature != 1.0:
        scaled = scaled / temperature
    log_dist = torch.log_softmax(scaled, dim=-1)
    if bool((torch.as_tensor(top_p) < 1.0).any()):
        sorted_logp, order = torch.sort(log_dist, dim=-1, descending=True)
        before = torch.cumsum(sorted_logp.exp(), dim=-1) - sorted_logp.exp()
        drop_sorted = before >= top_p  # tokens after the nucleus is already full
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        log_dist = torch.log_softmax(scaled.masked_fill(drop, float("-inf")), dim=-1)
    return log_dist.clamp_min(LOGPROB_FLOOR)
