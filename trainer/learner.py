"""The on-policy update: PPO-clip over one batch of scored rollouts of the serving checkpoint.

The rollouts were sampled by the serving checkpoint (the *behaviour* policy) and the update takes
several epochs over them, so the policy drifts away from the one that sampled them while it
learns: the importance ratio ``exp(logp_new - logp_behaviour)`` of each completion token corrects
for that drift, and clipping the ratio to ``1 ± clip`` keeps a few lucky rollouts from moving the
policy far. The reward is one number per interaction; its batch-normalised value (the advantage)
is shared by every token of the completion.

Rollouts whose prompt or completion length differs are trained in separate *shape groups* (one
tensor each, minibatches never mix them) rather than refused: prompts of different lengths are
normal, and padding would change what a recurrent policy sees.

The update runs through ``accelerate``: on a CPU by default, on whatever device the given
``Accelerator`` has otherwise, with the same code.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from accelerate import Accelerator

from trainer.examples import Example
from trainer.policy import Policy, check_tokens, token_logprobs

ADVANTAGE_EPS = 1e-8  # added to the rewards' std, so that a tiny spread does not explode


@dataclass(frozen=True)
class LearnerConfig:
    """How one update trains; stored with the checkpoint it produced."""

    lr: float = 0.005  # Adam's learning rate
    epochs: int = 4  # passes over the batch
    minibatch: int = 64  # examples per gradient step (fewer in a shape group's last one)
    clip: float = 0.2  # PPO keeps the ratio in [1 - clip, 1 + clip]
    max_grad_norm: float = 1.0  # gradients are clipped to this global norm
    seed: int = 0  # orders the minibatches; same seed and inputs, same weights

    def __post_init__(self) -> None:
        if not _finite_number(self.lr) or self.lr <= 0:
            raise ValueError(f"LearnerConfig.lr must be a finite number > 0, got {self.lr!r}")
        for name in ("epochs", "minibatch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LearnerConfig.{name} must be an integer >= 1, got {value!r}")
        if not _finite_number(self.clip) or not 0 < self.clip < 1:
            raise ValueError(f"LearnerConfig.clip must be in (0, 1), got {self.clip!r}")
        if not _finite_number(self.max_grad_norm) or self.max_grad_norm <= 0:
            raise ValueError("LearnerConfig.max_grad_norm must be a finite number > 0, "
                             f"got {self.max_grad_norm!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"LearnerConfig.seed must be an integer >= 0, got {self.seed!r}")


@dataclass(frozen=True)
class UpdateStats:
    """What one update did; ``has_signal`` is False when all rewards were equal (nothing
    to learn: the weights come back unchanged and no gradient step was taken)."""

    n_examples: int
    epochs: int
    mean_reward: float
    loss_first: float  # mean minibatch loss of the first epoch
    loss_last: float  # mean minibatch loss of the last epoch
    clip_fraction: float  # share of tokens of the last epoch whose ratio was clipped
    approx_kl: float  # mean over tokens of logp_behaviour - logp_new, after the update
    grad_steps: int
    has_signal: bool


@dataclass(frozen=True)
class ShapeGroup:
    """Examples of one prompt length and one completion length, as tensors."""

    indices: torch.Tensor  # [B] positions in the examples given
    prompts: torch.Tensor  # [B, P]
    completions: torch.Tensor  # [B, T]
    behaviour_logprobs: torch.Tensor  # [B, T]
    rewards: torch.Tensor  # [B]


def shape_groups(examples: Sequence[Example], vocab_size: int,
                 device: torch.device | str = "cpu") -> list[ShapeGroup]:
    """The examples as tensors, one group per (prompt length, completion length), in the order
    each shape first appears; token ids outside the vocabulary are a ValueError.

    >>> from trainer.rollout import Rollout
    >>> def ex(prompt, completion, reward):
    ...     logprobs = (-1.0,) * len(completion)
    ...     return Example(Rollout("i", "c", prompt, completion, logprobs, "2026-11-30T10:00:00Z"),
    ...                    reward)
    >>> examples = [ex((1, 2), (3,), 1.0), ex((1,), (3,), 0.0), ex((2, 2), (1,), 0.5)]
    >>> groups = shape_groups(examples, vocab_size=4)
    >>> [(g.indices.tolist(), tuple(g.prompts.shape)) for g in groups]
    [([0, 2], (2, 2)), ([1], (1, 1))]
    """
    by_shape: dict[tuple[int, int], list[int]] = {}
    for index, example in enumerate(examples):
        rollout = example.rollout
        check_tokens(rollout.prompt_ids, vocab_size, f"example {index}: prompt_ids")
        check_tokens(rollout.completion_ids, vocab_size, f"example {index}: completion_ids")
        if not _finite_number(example.reward):
            raise ValueError(f"example {index}: reward must be a finite number, "
                             f"got {example.reward!r}")
        shape = (len(rollout.prompt_ids), len(rollout.completion_ids))
        by_shape.setdefault(shape, []).append(index)
    groups = []
    for indices in by_shape.values():
        rollouts = [examples[i].rollout for i in indices]
        groups.append(ShapeGroup(
            indices=torch.tensor(indices, device=device),
            prompts=torch.tensor([r.prompt_ids for r in rollouts], device=device),
            completions=torch.tensor([r.completion_ids for r in rollouts], device=device),
            behaviour_logprobs=torch.tensor([r.logprobs for r in rollouts],
                                            dtype=torch.float32, device=device),
            rewards=torch.tensor([examples[i].reward for i in indices],
                                 dtype=torch.float32, device=device),
        ))  # fmt: skip
    return groups


def advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Rewards minus their mean over their std (+1e-8): the batch's own baseline and scale.

    >>> advantages(torch.tensor([1.0, 0.0, 0.5, 0.5])).tolist()  # doctest: +ELLIPSIS
    [1.41421..., -1.41421..., 0.0, 0.0]
    """
    centred = rewards - rewards.mean()
    return centred / (rewards.std(unbiased=False) + ADVANTAGE_EPS)


def ppo_loss(new_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
             advantage: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped surrogate loss (a scalar) and the share of tokens whose ratio was clipped.

    ``advantage`` is one per sequence ``[B]``, shared by its tokens ``[B, T]``.

    >>> lp = torch.log(torch.tensor([[0.5, 0.5]]))
    >>> loss, clipped = ppo_loss(lp, lp, torch.tensor([2.0]), clip=0.2)
    >>> float(loss), float(clipped)
    (-2.0, 0.0)
    >>> loss, clipped = ppo_loss(lp + 1.0, lp, torch.tensor([1.0]), clip=0.2)  # ratio e: capped
    >>> round(float(loss), 6), float(clipped)
    (-1.2, 1.0)
    """
    ratio = torch.exp(new_logprobs - behaviour_logprobs)
    per_token_advantage = advantage.unsqueeze(-1).expand_as(ratio)
    unclipped = ratio * per_token_advantage
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * per_token_advantage
    loss = -torch.minimum(unclipped, clipped).mean()
    clip_share = ((ratio - 1.0).abs() > clip).float().mean()
    return loss, clip_share


def update(policy: Policy, examples: Sequence[Example], config: LearnerConfig,
           accelerator: Accelerator | None = None) -> tuple[Policy, UpdateStats]:
    """A copy of ``policy`` trained on ``examples`` with PPO-clip, and what the update did.

    ``policy`` itself is never changed, nor torch's global random state. The trained copy comes
    back on the device of ``policy``, in its train/eval mode. ``accelerator`` defaults to
    ``Accelerator(cpu=True)``; pass ``Accelerator()`` to train on a GPU (it keeps a reference to
    the prepared model until its ``free_memory()``).
    """
    if not examples:
        raise ValueError("update needs at least one example")
    own_accelerator = accelerator is None
    accelerator = accelerator or Accelerator(cpu=True)
    home = next(policy.parameters()).device
    trained = copy.deepcopy(policy)
    groups = shape_groups(examples, policy.config.vocab_size, accelerator.device)
    rewards = torch.tensor([e.reward for e in examples], dtype=torch.float64)
    mean_reward = float(rewards.mean())
    has_signal = bool(rewards.max() > rewards.min())

    losses_first: list[float] = []
    losses_last: list[float] = []
    clipped_last: list[tuple[float, int]] = []  # (clipped share, tokens) per minibatch
    grad_steps = 0
    if has_signal:
        optimizer = torch.optim.Adam(trained.parameters(), lr=config.lr)
        model, optimizer = accelerator.prepare(trained, optimizer)
        model.train()
        advantage = advantages(rewards).to(torch.float32).to(accelerator.device)
        generator = torch.Generator().manual_seed(config.seed)
        for epoch in range(config.epochs):
            for group, rows in _minibatches(groups, config.minibatch, generator):
                new_logprobs = token_logprobs(cast(Policy, model), group.prompts[rows],
                                              group.completions[rows])
                loss, clip_share = ppo_loss(new_logprobs, group.behaviour_logprobs[rows],
                                            advantage[group.indices[rows]], config.clip)
                optimizer.zero_grad()
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
                grad_steps += 1
                if epoch == 0:
                    losses_first.append(loss.item())
                if epoch == config.epochs - 1:
                    losses_last.append(loss.item())
                    clipped_last.append((float(clip_share), new_logprobs.numel()))
        trained = cast(Policy, accelerator.unwrap_model(model))
        if own_accelerator:
            accelerator.free_memory()
    trained = trained.to(home).train(policy.training)
    tokens_last = sum(n for _, n in clipped_last)
    return trained, UpdateStats(
        n_examples=len(examples),
        epochs=config.epochs,
        mean_reward=mean_reward,
        loss_first=_mean(losses_first),
        loss_last=_mean(losses_last),
        clip_fraction=sum(s * n for s, n in clipped_last) / tokens_last if tokens_last else 0.0,
        approx_kl=_approx_kl(trained, groups),
        grad_steps=grad_steps,
        has_signal=has_signal,
    )


def _minibatches(groups: list[ShapeGroup], size: int, generator: torch.Generator
                 ) -> list[tuple[ShapeGroup, torch.Tensor]]:
    """One epoch's minibatches: each group shuffled and cut into ``size`` rows, the pieces of
    all groups in shuffled order; all randomness from ``generator``."""
    pieces: list[tuple[ShapeGroup, torch.Tensor]] = []
    for group in groups:
        order = torch.randperm(len(group.indices), generator=generator)
        pieces.extend((group, rows.to(group.indices.device)) for rows in order.split(size))
    return [pieces[i] for i in torch.randperm(len(pieces), generator=generator).tolist()]


@torch.no_grad()
def _approx_kl(policy: Policy, groups: list[ShapeGroup]) -> float:
    """Mean over all completion tokens of logp_behaviour - logp_new (k1 estimate per token)."""
    device = next(policy.parameters()).device
    total, tokens = 0.0, 0
    for group in groups:
        new = token_logprobs(policy, group.prompts.to(device), group.completions.to(device))
        total += float((group.behaviour_logprobs.to(device) - new).sum())
        tokens += new.numel()
    return total / tokens


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _finite_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))
