"""The policy: a small causal language model over token ids, and the two things asked of it.

The platform trains whatever model the serving side runs; what the trainer needs from it is only
(1) sampling a completion with the log-probability of each sampled token, which the serving side
publishes with the rollout as the *behaviour* log-probabilities, and (2) the log-probabilities of
given completions under the current weights, for the on-policy update and the evals. This module
is the small default model of the local loop (a GRU language model: trains on a CPU in seconds),
behind exactly that interface.

Completions have a fixed length (``max_new_tokens``, no end token): every rollout of a checkpoint
has the same shape, so a batch is one tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class PolicyConfig:
    """The model's shape; stored with every checkpoint so its weights can be loaded back."""

    vocab_size: int = 32
    hidden: int = 64
    layers: int = 1
    max_new_tokens: int = 8

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"PolicyConfig.{name} must be an integer >= 1, got {value!r}")
        if self.vocab_size < 2:
            raise ValueError("PolicyConfig.vocab_size must be at least 2")

    def to_json_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> PolicyConfig:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown PolicyConfig fields: {sorted(unknown)}")
        return cls(**data)


class Policy(nn.Module):
    """Embedding, GRU, and a head giving the next token's logits at every position."""

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden)
        self.rnn = nn.GRU(config.hidden, config.hidden, config.layers, batch_first=True)
        self.head = nn.Linear(config.hidden, config.vocab_size)

    def forward(self, tokens: torch.Tensor,
                state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[B, L, V]`` of the token after each position, and the recurrent state."""
        out, state = self.rnn(self.embed(tokens), state)
        return self.head(out), state


def new_policy(config: PolicyConfig, seed: int) -> Policy:
    """A freshly initialised policy; the same seed gives the same weights."""
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return Policy(config)
    finally:
        torch.random.set_rng_state(generator_state)


def check_tokens(ids: Sequence[int], vocab_size: int, what: str) -> None:
    if not ids:
        raise ValueError(f"{what} is empty")
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab_size:
            raise ValueError(f"{what} holds {token!r}: token ids are integers in [0, {vocab_size})")


@torch.no_grad()
def sample(policy: Policy, prompt_ids: Sequence[int], generator: torch.Generator,
           temperature: float = 1.0) -> tuple[list[int], list[float]]:
    """One completion of ``max_new_tokens`` tokens and each sampled token's log-probability
    (of the distribution sampled from: at ``temperature``).

    >>> policy = new_policy(PolicyConfig(vocab_size=8, max_new_tokens=4), seed=0)
    >>> ids, logprobs = sample(policy, [1, 2, 3], torch.Generator().manual_seed(0))
    >>> len(ids), len(logprobs), all(0 <= t < 8 for t in ids), all(lp <= 0 for lp in logprobs)
    (4, 4, True, True)
    >>> sample(policy, [1, 2, 3], torch.Generator().manual_seed(0)) == (ids, logprobs)
    True
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    check_tokens(prompt_ids, policy.config.vocab_size, "prompt_ids")
    logits, state = policy(torch.tensor([list(prompt_ids)]))
    ids: list[int] = []
    logprobs: list[float] = []
    for _ in range(policy.config.max_new_tokens):
        log_dist = torch.log_softmax(logits[0, -1] / temperature, dim=-1)
        token = int(torch.multinomial(log_dist.exp(), 1, generator=generator))
        ids.append(token)
        logprobs.append(float(log_dist[token]))
        logits, state = policy(torch.tensor([[token]]), state)
    return ids, logprobs


def token_logprobs(policy: Policy, prompts: torch.Tensor,
                   completions: torch.Tensor) -> torch.Tensor:
    """Log-probabilities ``[B, T]`` of each completion token given its prompt and the tokens
    before it, with gradients (prompts ``[B, P]``, completions ``[B, T]``, integer tensors).

    >>> policy = new_policy(PolicyConfig(vocab_size=8, max_new_tokens=4), seed=0)
    >>> ids, logprobs = sample(policy, [1, 2, 3], torch.Generator().manual_seed(0))
    >>> again = token_logprobs(policy, torch.tensor([[1, 2, 3]]), torch.tensor([ids]))
    >>> torch.allclose(again, torch.tensor([logprobs]), atol=1e-5)
    True
    """
    if prompts.ndim != 2 or completions.ndim != 2 or prompts.shape[0] != completions.shape[0]:
        raise ValueError("prompts [B, P] and completions [B, T] must be 2-D with the same B")
    tokens = torch.cat([prompts, completions], dim=1)
    logits, _ = policy(tokens[:, :-1])
    start = prompts.shape[1] - 1  # the logits that predict the first completion token
    log_dist = torch.log_softmax(logits[:, start:], dim=-1)
    return log_dist.gather(-1, completions.unsqueeze(-1)).squeeze(-1)
