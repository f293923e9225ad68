"""The on-policy update: PPO-clip over one batch of scored rollouts of the serving checkpoint.

Per completion token ``t`` the update weighs three log-probabilities: the *behaviour* one the
serving side recorded (``mu``), the *old* one of the checkpoint being trained as it was when the
round began (``pi_old``, computed here once, or taken as ``mu`` where the round measured the two
equal), and the *new* one of the weights as they move (``pi``). The surrogate is PPO's clipped ratio
``pi / pi_old`` times the advantage, multiplied by a truncated importance weight ``min(pi_old / mu,
tis_cap)`` (detached). When the serving engine computed exactly what the trainer computes, ``pi_old
== mu`` and the weight is 1: this is PPO against the behaviour log-probabilities. When they differ
(another engine, other kernels, bf16), the truncated weight corrects for it without letting one
token's ratio explode. ``behaviour_ratio_dev`` reports how far apart they were.

Advantages are ``trainer.advantages``': GRPO within a prompt's group, a running baseline for
a completion alone with its prompt, one trajectory counting once. An optional KL penalty to a fixed
reference (the lineage's first checkpoint), estimated for KL(pi || reference) from the behaviour
policy's samples (:func:`trainer.losses.kl_penalty`), and an early stop once the mean KL from
``pi_old`` passes ``target_kl`` keep the update inside what the gate accepts.

Runs through ``accelerate``: CPU or GPU (bf16 autocast when the accelerator has it), and under
``accelerate launch --num_processes N`` each rank trains on its shard with gradients averaged.
Minibatches are padded batches of prompts and completions of any lengths; ``micro_batch`` rows
go through the model at once and their gradients accumulate up to ``minibatch`` rows a step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from accelerate import Accelerator

from models.examples import Example, trajectories
from models.policy import CausalLMPolicy
from models.scoring import by_length, score_rollouts, score_rows
from trainer.advantages import next_baseline, trajectory_advantages
from trainer.learner_config import LearnerConfig, _finite
from trainer.losses import k3_kl, kl_penalty, ppo_token_loss

FINAL_KL_ROWS = 64  # the closing KL, a report, on these rows (all cost 1/3 of an epoch)

__all__ = ["LearnerConfig", "Progress", "UpdateResult", "UpdateStats", "update"]


@dataclass(frozen=True)
class UpdateStats:
    """What one update did; ``has_signal`` is False when every advantage was 0 (nothing to
    learn: the weights come back unchanged and no gradient step was taken)."""

    n_examples: int
    tokens: int  # completion tokens trained on, per epoch
    epochs_run: int
    grad_steps: int
    mean_reward: float  # per trajectory (an agent run counts once, as a single answer does)
    loss_first: float  # mean step loss of the first epoch
    loss_last: float  # mean step loss of the last epoch run
    clip_fraction: float  # share of tokens of the last epoch whose ratio was clipped
    approx_kl: float  # mean per token of KL(pi_old || pi) after the update (k3 estimate)
    ref_kl: float  # mean per token of KL(pi || reference) at the last step (kl_penalty's
    # importance-weighted k3 on the behaviour policy's tokens); 0 without one
    behaviour_ratio_dev: float  # max over tokens of |pi_old / mu - 1| before any step (0 when
    # pi_old was taken as mu: the mismatch check measured them instead)
    old_logprobs: str  # where pi_old came from: "scored" (a pass over the examples) or
    # "behaviour" (the recorded ones, when the round found them exact: update's docstring)
    early_stopped: bool  # target_kl was passed
    has_signal: bool
    seconds: float
    tokens_per_s: float  # completion tokens through forward + backward per second


@dataclass
class Progress:
    """Where an update stands after a step: enough to resume it exactly after a crash."""

    step: int = 0  # optimizer steps taken
    losses: list[list[float]] = field(default_factory=list)  # per epoch
    clipped: list[float] = field(default_factory=lambda: [0.0, 0.0])  # last epoch: sum, tokens
    early_stopped: bool = False

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Progress:
        return cls(**data)


@dataclass(frozen=True)
class UpdateResult:
    stats: UpdateStats
    optimizer_state: dict[str, Any]
    baseline: dict[str, float]  # the running baseline after this batch


def update(policy: CausalLMPolicy, examples: Sequence[Example], config: LearnerConfig,
           accelerator: Accelerator | None = None, *, baseline: dict[str, float] | None = None,
           reference: Sequence[torch.Tensor] | None = None,
           optimizer_state: dict[str, Any] | None = None, old_is_behaviour: bool = False,
           resume: Callable[[], tuple[Progress, dict[str, Any]] | None] | None = None,
           on_step: Callable[[Progress, dict[str, Any]], None] | None = None
           ) -> UpdateResult:  # fmt: skip
    """Train ``policy`` in place on ``examples`` with PPO-clip; what the update did.

    ``reference`` holds each example's per-token log-probabilities under the fixed reference (needed
    when ``kl_coef > 0``). ``optimizer_state`` continues the optimizer's moments of an earlier
    round. ``old_is_behaviour``: ``pi_old`` is the recorded behaviour log-probabilities, with no
    scoring pass over the examples first; only for a caller that measured them to be the weights'
    own (``train_round`` asks the mismatch check: ``exact_behaviour_kl``). On SmolLM2 that pass is a
    third of an update stopped early at the target KL. ``resume`` is called once ``pi_old`` is known
    (from the weights as given): it may load an interrupted run's weights into the policy and return
    its progress and optimizer state; the update then skips the steps already taken and ends where
    an uninterrupted one would. ``on_step`` is called after each optimizer step with the progress
    and the optimizer's state (to save them).
    """
    if not examples:
        raise ValueError("update needs at least one example")
    if config.kl_coef > 0 and (reference is None or len(reference) != len(examples)):
        raise ValueError("kl_coef > 0 needs the reference log-probabilities of every example")
    accelerator = accelerator or Accelerator(cpu=True)
    started = time.perf_counter()
    rollouts = [e.rollout for e in examples]
    for i, r in enumerate(rollouts):
        policy.check_tokens(r.prompt_ids, f"example {i}: prompt_ids")
        policy.check_tokens(r.completion_ids, f"example {i}: completion_ids")
        if not _finite(examples[i].reward):
            raise ValueError(
                f"example {i}: reward must be a finite number, got {examples[i].reward!r}"
            )
    rewards = [e.scored for e in examples]
    adv, batch_baseline = trajectory_advantages(examples, baseline or {}, config.adv_std_floor)
    new_baseline = next_baseline(baseline or {}, batch_baseline, config.baseline_decay)
    has_signal = any(abs(a) > 0 for a in adv)
    rank, world = accelerator.process_index, accelerator.num_processes
    shard = _shard(len(examples), rank, world)
    behaviour = {i: torch.tensor(rollouts[i].logprobs, device=policy.device) for i in shard}
    if old_is_behaviour:
        old, deviation = behaviour, 0.0
    else:
        old = score_rows(policy, examples, shard, config.micro_batch)
        deviation = max(float((torch.exp(old[i] - behaviour[i]) - 1).abs().max()) for i in shard)
    tokens = sum(len(rollouts[i].completion_ids) for i in shard)

    resumed = resume() if resume is not None else None
    progress = resumed[0] if resumed else Progress()
    optimizer_state = resumed[1] if resumed else optimizer_state
    trainable = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay)
    if optimizer_state is not None:
        optimizer.load_state_dict(optimizer_state)
    ref_kl = 0.0
    if has_signal:
        scorer, optimizer = accelerator.prepare(policy.scorer, optimizer)
        policy.model.train()
        steps_per_epoch = math.ceil(len(shard) / config.minibatch)
        step = 0
        for epoch in range(config.epochs):
            if progress.early_stopped:
                break
            if len(progress.losses) <= epoch:
                progress.losses.append([])
                progress.clipped = [0.0, 0.0]
            order = torch.randperm(len(shard), generator=torch.Generator().manual_seed(
                config.seed * 100_003 + epoch)).tolist()  # fmt: skip
            for start in range(0, len(shard), config.minibatch):
                step += 1
                if step <= progress.step:  # taken before an interruption
                    continue
                rows = [shard[k] for k in order[start : start + config.minibatch]]
                loss, clipped, kl_old, kl_ref = _step(
                    policy, scorer, optimizer, accelerator, examples, rows, old, behaviour,
                    adv, reference, config)  # fmt: skip
                ref_kl = kl_ref
                progress.step = step
                progress.losses[epoch].append(loss)
                progress.clipped = [
                    progress.clipped[0] + clipped[0],
                    progress.clipped[1] + clipped[1],
                ]
                if config.target_kl > 0 and kl_old > config.target_kl:
                    progress.early_stopped = True
                if on_step is not None:
                    on_step(progress, optimizer.state_dict())
                if progress.early_stopped:
                    break
            assert step <= (epoch + 1) * steps_per_epoch
        policy.model.eval()
    measured = shard[:FINAL_KL_ROWS]
    final = score_rows(policy, examples, measured, config.micro_batch)
    pairs = [torch.cat([rows[i] for i in measured] or [torch.zeros(0)]) for rows in (old, final)]
    approx_kl = float(k3_kl(*pairs).mean()) if len(pairs[0]) else 0.0
    seconds = time.perf_counter() - started
    epochs_run = len(progress.losses)
    runs = trajectories(examples)
    unwrapped = optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer
    return UpdateResult(UpdateStats(
        n_examples=len(examples), tokens=tokens, epochs_run=epochs_run,
        grad_steps=progress.step, mean_reward=_mean([rewards[g[0]] for g in runs]),
        loss_first=_mean(progress.losses[0]) if progress.losses else 0.0,
        loss_last=_mean(progress.losses[-1]) if progress.losses else 0.0,
        clip_fraction=progress.clipped[0] / progress.clipped[1] if progress.clipped[1] else 0.0,
        approx_kl=approx_kl, ref_kl=ref_kl, behaviour_ratio_dev=deviation,
        old_logprobs="behaviour" if old_is_behaviour else "scored",
        early_stopped=progress.early_stopped, has_signal=has_signal, seconds=seconds,
        tokens_per_s=tokens * epochs_run / seconds if seconds > 0 else 0.0,
    ), unwrapped.state_dict(), new_baseline)  # fmt: skip


def _step(policy: CausalLMPolicy, scorer: Any, optimizer: Any, accelerator: Accelerator,
          examples: Sequence[Example], rows: list[int], old: dict[int, torch.Tensor],
          behaviour: dict[int, torch.Tensor], adv: list[float],
          reference: Sequence[torch.Tensor] | None, config: LearnerConfig
          ) -> tuple[float, tuple[float, float], float, float]:  # fmt: skip
    """One optimizer step over ``rows``, in micro-batches; loss, (clipped, tokens), KL to old,
    KL to reference."""
    device = policy.device
    step_tokens = sum(len(examples[i].rollout.completion_ids) for i in rows)
    total_loss = clipped = kl_old = kl_ref = 0.0
    rows = by_length(examples, rows)  # the step's gradient is the same in any order
    micro = [rows[k : k + config.micro_batch] for k in range(0, len(rows), config.micro_batch)]
    optimizer.zero_grad()
    for n, part in enumerate(micro):
        rollouts = [examples[i].rollout for i in part]
        sync = n == len(micro) - 1
        with accelerator.no_sync(scorer) if not sync else _null():
            new = score_rollouts(policy, rollouts, scorer=scorer)
            new_flat = torch.cat(new)
            old_flat = torch.cat([old[i] for i in part])
            mu_flat = torch.cat([behaviour[i] for i in part])
            adv_flat = torch.cat([torch.full((len(old[i]),), adv[i], device=device)
                                  for i in part])  # fmt: skip
            token_loss, was_clipped = ppo_token_loss(
                new_flat, old_flat, mu_flat, adv_flat, config.clip, config.tis_cap
            )
            if config.kl_coef > 0:
                assert reference is not None
                ref_flat = torch.cat([reference[i].to(device) for i in part])
                penalty = kl_penalty(new_flat, mu_flat, ref_flat, config.tis_cap)
                token_loss = token_loss + config.kl_coef * penalty
                kl_ref += float(penalty.detach().sum())
            loss = token_loss.sum() / step_tokens
            accelerator.backward(loss)
        total_loss += float(loss.detach())
        clipped += float(was_clipped.sum())
        kl_old += float(k3_kl(old_flat, new_flat.detach()).sum())
    accelerator.clip_grad_norm_(scorer.parameters(), config.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    kl = torch.tensor(kl_old / step_tokens, device=accelerator.device)
    kl = accelerator.reduce(kl, "mean") if accelerator.num_processes > 1 else kl
    return total_loss, (clipped, float(step_tokens)), float(kl), kl_ref / step_tokens


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _shard(n: int, rank: int, world: int) -> list[int]:
    """This rank's example indices; every rank gets the same count (the shortest shards repeat
    their first examples) so that all ranks take the same optimizer steps.

    >>> _shard(5, 0, 2), _shard(5, 1, 2)
    ([0, 2, 4], [1, 3, 1])
    """
    own = list(range(rank, n, world))
    size = math.ceil(n / world)
    while len(own) < size:
        own.append(own[len(own) % max(len(own), 1)] if own else rank % n)
    return own


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
