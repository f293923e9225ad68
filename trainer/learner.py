"""The on-policy update: PPO-clip over one round's scored runs of the serving checkpoint.

Per completion token ``t`` the update weighs three log-probabilities: the *behaviour* one the
serving side recorded (``mu``), the *old* one of the checkpoint being trained as it was when the
round began (``pi_old``, computed here once, or taken as ``mu`` where the round measured the two
equal), and the *new* one of the weights as they move (``pi``). The surrogate is PPO's clipped ratio
``pi / pi_old`` times the advantage, multiplied by a truncated importance weight ``min(pi_old / mu,
tis_cap)`` (detached). When the serving engine computed exactly what the trainer computes, ``pi_old
== mu`` and the weight is 1: this is PPO against the behaviour log-probabilities. When they differ
(another engine, other kernels, bf16), the truncated weight corrects for it without letting one
token's ratio explode. ``behaviour_ratio_dev`` reports how far apart they were.

The unit is the run (an agent interaction's calls, or a single answer): one advantage per run,
its reward against the other runs of its task (``trainer.advantages``), carried by every sampled
token of every call of the run. The loss is the sum over the tokens trained on divided by one
constant per round (``trainer.epochs.loss_normaliser``), so a long run's tokens and a short
run's weigh the same. Every epoch passes over every run once, in 2 to 4 minibatches of whole
runs; the first epoch's learning rate is lowered so its KL per run stays on a path that ends
under a share of the gate's limit, and a later epoch goes on only while that holds
(``trainer.epochs``, which states the rule). An optional KL penalty to a fixed reference (the
lineage's first checkpoint), estimated for KL(pi || reference) from the behaviour policy's
samples (:func:`trainer.losses.kl_penalty`), keeps the update nearer its origin still.

Runs through ``accelerate``: CPU or GPU (bf16 autocast when the accelerator has it), and under
``accelerate launch --num_processes N`` each rank trains on its share of the runs with gradients
averaged. ``micro_batch`` calls go through the model at once and their gradients accumulate up
to a minibatch a step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from accelerate import Accelerator

from models.examples import Example, trajectories
from models.policy import CausalLMPolicy
from models.scoring import by_length, score_rollouts, score_rows
from release.gate import GateConfig
from trainer.advantages import run_advantages
from trainer.epochs import KlRule, loss_normaliser, per_run_kl, run_minibatches, shard_runs
from trainer.learner_config import LearnerConfig, _finite
from trainer.losses import k3_kl, kl_penalty, ppo_token_loss

FINAL_KL_ROWS = 64  # the closing KL, a report, on the whole runs of about this many calls

__all__ = ["LearnerConfig", "Progress", "UpdateResult", "UpdateStats", "update"]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpdateStats:
    """What one update did; ``has_signal`` is False when every advantage was 0 (nothing to
    learn: the weights come back unchanged and no gradient step was taken)."""

    n_examples: int
    tokens: int  # completion tokens of this rank's runs, trained on once per epoch
    epochs_run: int
    grad_steps: int
    mean_reward: float  # per run (an agent run counts once, as a single answer does)
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
    early_stopped: bool  # a later epoch stopped at the KL rule
    has_signal: bool
    seconds: float
    tokens_per_s: float  # completion tokens through forward + backward per second
    runs: int = 0  # runs trained on (an agent run's calls count once)
    kl_budget: float = 0.0  # the KL per run the epoch must end under (trainer.epochs)
    run_kl: float = 0.0  # KL(pi_old || pi) per run after the update, on the closing runs
    lr_scale: float = 1.0  # the factor the KL rule left on the learning rate
    minibatch_kl: tuple[float, ...] = ()  # per step: the KL per run measured before it


@dataclass
class Progress:
    """Where an update stands after a step: enough to resume it exactly after a crash."""

    step: int = 0  # optimizer steps taken
    losses: list[list[float]] = field(default_factory=list)  # per epoch
    clipped: list[float] = field(default_factory=lambda: [0.0, 0.0])  # last epoch: sum, tokens
    early_stopped: bool = False
    lr_scale: float = 1.0  # the KL rule's factor on the learning rate so far
    minibatch_kl: list[float] = field(default_factory=list)  # per step, before it

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Progress:
        return cls(**data)


@dataclass(frozen=True)
class UpdateResult:
    stats: UpdateStats
    optimizer_state: dict[str, Any]


@dataclass(frozen=True)
class StepFigures:
    """What one minibatch's forward and backward passes measured, before its step."""

    loss: float
    clipped: tuple[float, float]  # tokens whose ratio was clipped, tokens
    token_kl: float  # KL(pi_old || pi) per token, over every rank
    run_kl: float  # KL(pi_old || pi) per run, over every rank
    ref_kl: float  # the reference penalty per token


def update(policy: CausalLMPolicy, examples: Sequence[Example], config: LearnerConfig,
           accelerator: Accelerator | None = None, *,
           reference: Sequence[torch.Tensor] | None = None,
           optimizer_state: dict[str, Any] | None = None, old_is_behaviour: bool = False,
           resume: Callable[[], tuple[Progress, dict[str, Any]] | None] | None = None,
           on_step: Callable[[Progress, dict[str, Any]], None] | None = None,
           gate_max_kl: float = GateConfig.max_kl,
           should_stop: Callable[[], bool] | None = None) -> UpdateResult:  # fmt: skip
    """Train ``policy`` in place on ``examples`` with PPO-clip; what the update did.

    ``reference`` holds each example's per-token log-probabilities under the fixed reference (needed
    when ``kl_coef > 0``). ``optimizer_state`` continues the optimizer's moments of an earlier
    round. ``old_is_behaviour``: ``pi_old`` is the recorded behaviour log-probabilities, with no
    scoring pass over the examples first; only for a caller that measured them to be the weights'
    own (``train_round`` asks the mismatch check: ``exact_behaviour_kl``). ``resume`` is called
    once ``pi_old`` is known (from the weights as given): it may load an interrupted run's weights
    into the policy and return its progress and optimizer state; the update then skips the steps
    already taken and ends where an uninterrupted one would. ``on_step`` is called after each
    optimizer step with the progress and the optimizer's state (to save them). ``gate_max_kl``:
    the gate's limit on KL per run, of which ``config.gate_kl_share`` is the epoch's budget.
    ``should_stop``, asked before every micro-batch: when it says so, :class:`UpdateStopped`
    carries the last step's progress and optimizer state (SIGTERM within seconds).
    """
    if not examples:
        raise ValueError("update needs at least one example")
    if config.kl_coef > 0 and (reference is None or len(reference) != len(examples)):
        raise ValueError("kl_coef > 0 needs the reference log-probabilities of every example")
    for i, e in enumerate(examples):
        policy.check_tokens(e.rollout.prompt_ids, f"example {i}: prompt_ids")
        policy.check_tokens(e.rollout.completion_ids, f"example {i}: completion_ids")
        if not _finite(e.reward):
            raise ValueError(f"example {i}: reward must be a finite number, got {e.reward!r}")
    accelerator = accelerator or Accelerator(cpu=True)
    started = time.perf_counter()
    runs = trajectories(examples)
    mine = [runs[k] for k in shard_runs(len(runs), accelerator.process_index,
                                        accelerator.num_processes)]  # fmt: skip
    shard = [i for run in mine for i in run]
    adv = run_advantages(examples, config.adv_scale)
    behaviour = {i: torch.tensor(examples[i].rollout.logprobs, device=policy.device) for i in shard}
    if old_is_behaviour:
        old, deviation = behaviour, 0.0
    else:
        old = score_rows(policy, examples, shard, config.micro_batch)
        deviation = max(float((torch.exp(old[i] - behaviour[i]) - 1).abs().max()) for i in shard)
    resumed = resume() if resume is not None else None
    progress = resumed[0] if resumed else Progress()
    optimizer_state = resumed[1] if resumed else optimizer_state
    trainable = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay)
    if optimizer_state is not None:
        optimizer.load_state_dict(optimizer_state)
    total = sum(len(e.rollout.completion_ids) for e in examples)
    normaliser = loss_normaliser(total, config.minibatches, accelerator.num_processes)
    rule = KlRule(config.gate_kl_share * gate_max_kl, config.target_kl, config.minibatches)
    trainer = _Trainer(policy, accelerator, examples, old, behaviour, adv, reference, config)
    ref_kl = 0.0
    if any(abs(a) > 0 for a in adv):
        ref_kl = trainer.train(optimizer, mine, normaliser, rule, progress, on_step, should_stop)
    _, run_kl, approx_kl = _closing_kl(policy, examples, mine, old, config.micro_batch)
    seconds = time.perf_counter() - started
    tokens = sum(len(examples[i].rollout.completion_ids) for i in shard)
    epochs_run = len(progress.losses)
    unwrapped = optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer
    return UpdateResult(UpdateStats(
        n_examples=len(examples), tokens=tokens, epochs_run=epochs_run,
        grad_steps=progress.step, mean_reward=_mean([examples[r[0]].scored for r in runs]),
        loss_first=_mean(progress.losses[0]) if progress.losses else 0.0,
        loss_last=_mean(progress.losses[-1]) if progress.losses else 0.0,
        clip_fraction=progress.clipped[0] / progress.clipped[1] if progress.clipped[1] else 0.0,
        approx_kl=approx_kl, ref_kl=ref_kl, behaviour_ratio_dev=deviation,
        old_logprobs="behaviour" if old_is_behaviour else "scored",
        early_stopped=progress.early_stopped, has_signal=any(abs(a) > 0 for a in adv),
        seconds=seconds, tokens_per_s=tokens * epochs_run / seconds if seconds > 0 else 0.0,
        runs=len(runs), kl_budget=rule.budget, run_kl=run_kl, lr_scale=progress.lr_scale,
        minibatch_kl=tuple(progress.minibatch_kl),
    ), unwrapped.state_dict())  # fmt: skip


class UpdateStopped(Exception):
    """A stop was asked for during the update: ``progress`` and ``optimizer_state`` are those of
    the last step taken, as the policy's weights are (a partial step's gradients are dropped), so
    that saving them lets the update resume exactly there."""

    def __init__(self, progress: Progress, optimizer_state: dict[str, Any]) -> None:
        super().__init__(f"stopped after step {progress.step}")
        self.progress, self.optimizer_state = progress, optimizer_state


class _Stopped(Exception):
    """Raised between micro-batches; the step's caller turns it into :class:`UpdateStopped`."""


@dataclass
class _Trainer:
    """The update's fixed parts, shared by its steps: the model, the runs' tensors, the
    advantages and the settings."""

    policy: CausalLMPolicy
    accelerator: Accelerator
    examples: Sequence[Example]
    old: dict[int, torch.Tensor]
    behaviour: dict[int, torch.Tensor]
    adv: list[float]
    reference: Sequence[torch.Tensor] | None
    config: LearnerConfig

    def train(self, optimizer: torch.optim.Optimizer, runs: list[list[int]], normaliser: float,
              rule: KlRule, progress: Progress,
              on_step: Callable[[Progress, dict[str, Any]], None] | None,
              should_stop: Callable[[], bool] | None = None) -> float:  # fmt: skip
        """Every epoch over ``runs`` (each a list of example indices) in minibatches of whole
        runs, under ``rule``; the last step's reference KL per token."""
        config, ref_kl, step = self.config, 0.0, 0
        scorer, optimizer = self.accelerator.prepare(self.policy.scorer, optimizer)
        self.policy.model.train()
        for epoch in range(config.epochs):
            if progress.early_stopped:
                break
            if len(progress.losses) <= epoch:
                progress.losses.append([])
                progress.clipped = [0.0, 0.0]
            for j, part in enumerate(run_minibatches(len(runs), config.minibatches,
                                                     config.seed, epoch)):  # fmt: skip
                step += 1
                if step <= progress.step:  # taken before an interruption
                    continue
                rows = [i for k in part for i in runs[k]]
                try:
                    figures = self._gradients(scorer, rows, normaliser, should_stop)
                except _Stopped:
                    optimizer.zero_grad()
                    self.policy.model.eval()
                    raise UpdateStopped(progress, optimizer.state_dict()) from None
                if epoch == 0:
                    progress.lr_scale = rule.first_epoch_scale(progress.lr_scale, j,
                                                               figures.run_kl)  # fmt: skip
                elif not rule.may_continue(step - 1, figures.run_kl, figures.token_kl):
                    progress.early_stopped = True
                    optimizer.zero_grad()
                    log.info("epoch %d stops before step %d: KL %.4f a run, %.5f a token "
                             "(budget %.4f a run)", epoch + 1, j + 1, figures.run_kl,
                             figures.token_kl, rule.budget)  # fmt: skip
                    break
                self._apply(scorer, optimizer, progress.lr_scale)
                ref_kl = figures.ref_kl
                _record(progress, epoch, figures)
                log.info("epoch %d minibatch %d: %d runs, KL %.4f a run (budget %.4f), %.5f a "
                         "token, lr x%.3f", epoch + 1, j + 1, len(part), figures.run_kl,
                         rule.budget, figures.token_kl, progress.lr_scale)  # fmt: skip
                if on_step is not None:
                    on_step(progress, optimizer.state_dict())
        self.policy.model.eval()
        return ref_kl

    def _apply(self, scorer: Any, optimizer: Any, lr_scale: float) -> None:
        """The optimizer step at the KL rule's learning rate, gradients clipped first."""
        self.accelerator.clip_grad_norm_(scorer.parameters(), self.config.max_grad_norm)
        for group in optimizer.param_groups:
            group["lr"] = self.config.lr * lr_scale
        optimizer.step()
        optimizer.zero_grad()

    def _gradients(self, scorer: Any, rows: list[int], normaliser: float,
                   should_stop: Callable[[], bool] | None = None) -> StepFigures:  # fmt: skip
        """Forward and backward over ``rows`` in micro-batches, gradients accumulated: the
        loss is every token's loss summed and divided by the round's ``normaliser``;
        ``should_stop`` is asked before each micro-batch (a stop within seconds, not a step)."""
        examples, config, accelerator = self.examples, self.config, self.accelerator
        loss_sum = clipped = kl_old = kl_ref = 0.0
        runs_kl: list[torch.Tensor] = []
        rows = by_length(examples, rows)  # the step's gradient is the same in any order
        micro = [rows[k : k + config.micro_batch] for k in range(0, len(rows), config.micro_batch)]
        for n, part in enumerate(micro):
            if should_stop is not None and should_stop():
                raise _Stopped
            with accelerator.no_sync(scorer) if n < len(micro) - 1 else _null():
                new = score_rollouts(self.policy, [examples[i].rollout for i in part],
                                     scorer=scorer)  # fmt: skip
                loss, was_clipped, penalty = self.micro_loss(part, torch.cat(new), normaliser)
                accelerator.backward(loss)
            loss_sum += float(loss.detach())
            clipped += float(was_clipped.sum())
            kl_ref += penalty
            for i, values in zip(part, new, strict=True):
                runs_kl.append(k3_kl(self.old[i], values.detach()))
                kl_old += float(runs_kl[-1].sum())
        tokens = sum(len(examples[i].rollout.completion_ids) for i in rows)
        by_run: dict[object, torch.Tensor] = {}
        for i, values in zip(rows, runs_kl, strict=True):
            run = examples[i]
            key = (run.org_id, run.rollout.interaction_id) if run.rollout.turn else i
            by_run[key] = values.sum() + by_run.get(key, torch.zeros((), device=values.device))
        measured = torch.tensor([kl_old / tokens, per_run_kl(list(by_run.values()))],
                                device=accelerator.device)  # fmt: skip
        if accelerator.num_processes > 1:
            measured = accelerator.reduce(measured, "mean")
        return StepFigures(loss_sum, (clipped, float(tokens)), float(measured[0]),
                           float(measured[1]), kl_ref / tokens)  # fmt: skip

    def micro_loss(self, part: list[int], new_flat: torch.Tensor, normaliser: float
                   ) -> tuple[torch.Tensor, torch.Tensor, float]:  # fmt: skip
        """The loss of ``part``'s calls: the clipped surrogate of every token (with the KL
        penalty when one is set) summed and divided by the round's ``normaliser``, so each
        token of every run weighs the same; per token whether it was clipped; the penalty's
        sum."""
        device, config = self.policy.device, self.config
        old_flat = torch.cat([self.old[i] for i in part])
        mu_flat = torch.cat([self.behaviour[i] for i in part])
        adv_flat = torch.cat([torch.full((len(self.old[i]),), self.adv[i], device=device)
                              for i in part])  # fmt: skip
        token_loss, was_clipped = ppo_token_loss(
            new_flat, old_flat, mu_flat, adv_flat, config.clip, config.tis_cap
        )
        if config.kl_coef <= 0:
            return token_loss.sum() / normaliser, was_clipped, 0.0
        assert self.reference is not None
        ref_flat = torch.cat([self.reference[i].to(device) for i in part])
        penalty = kl_penalty(new_flat, mu_flat, ref_flat, config.tis_cap)
        loss = (token_loss + config.kl_coef * penalty).sum() / normaliser
        return loss, was_clipped, float(penalty.detach().sum())


def _record(progress: Progress, epoch: int, figures: StepFigures) -> None:
    """A step taken: its loss, clipped tokens and the KL measured before it."""
    progress.step += 1
    progress.losses[epoch].append(figures.loss)
    progress.clipped = [progress.clipped[0] + figures.clipped[0],
                        progress.clipped[1] + figures.clipped[1]]  # fmt: skip
    progress.minibatch_kl.append(figures.run_kl)


def _closing_kl(policy: CausalLMPolicy, examples: Sequence[Example], runs: list[list[int]],
                old: dict[int, torch.Tensor], micro_batch: int
                ) -> tuple[int, float, float]:  # fmt: skip
    """KL(pi_old || pi) after the update on the first whole runs of about ``FINAL_KL_ROWS``
    calls: how many runs, per run and per token."""
    chosen: list[list[int]] = []
    for run in runs:
        if chosen and sum(map(len, chosen)) + len(run) > FINAL_KL_ROWS:
            break
        chosen.append(run)
    rows = [i for run in chosen for i in run]
    final = score_rows(policy, examples, rows, micro_batch)
    per_token = [k3_kl(old[i], final[i]) for i in rows]
    run_kl = per_run_kl([torch.cat([per_token[rows.index(i)] for i in run]) for run in chosen])
    flat = torch.cat(per_token) if per_token else torch.zeros(0)
    return len(chosen), run_kl, float(flat.mean()) if len(flat) else 0.0


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
