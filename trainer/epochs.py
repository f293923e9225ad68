"""How an update walks through a round's runs, apart from the tensors (``trainer.learner``):
which runs each rank trains, the minibatches of whole runs an epoch is cut into, the loss's
one normaliser per round, and the KL rule that sets the learning rate and decides whether a
later epoch goes on.

The rule, with ``B = gate_kl_share * GateConfig.max_kl`` the KL budget per run (nats, the
gate's unit: ``KL(behaviour || candidate)`` summed over a run's sampled tokens):

* Every epoch passes over every training run once, in ``minibatches`` (2 to 4) minibatches of
  whole runs. The first epoch is never cut short: a target KL that ended it after 3 of 12
  minibatches of random calls left the round's rare solved run untrained most of the time.
* Before each step, the forward pass of the minibatch about to be trained measures its runs'
  KL per run from the round's start (k3 summed over each run's tokens; in the first epoch
  those runs are unseen, as the gate's held-out users are). In the first epoch it should
  follow the path ``B * (j / m)**2`` after ``j`` of ``m`` steps (KL grows as the square of a
  displacement that each step adds to alike); where it is above the path, the learning rate of
  the remaining steps is multiplied by ``sqrt(path / measured)`` (KL scales as the square of
  the step), and it is never raised again (:meth:`KlRule.first_epoch_scale`).
* A later epoch's step is taken only while one more step on that path ends under ``B``:
  measured ``<= B * (n / (n + 1))**2`` after ``n`` steps, and the per-token KL under
  ``target_kl`` where one is set (:meth:`KlRule.may_continue`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch


def shard_runs(n_runs: int, rank: int, world: int) -> list[int]:
    """This rank's run indices; every rank gets the same count (the shortest shards repeat
    their first runs) so that all ranks take the same optimizer steps.

    >>> shard_runs(5, 0, 2), shard_runs(5, 1, 2)
    ([0, 2, 4], [1, 3, 1])
    """
    own = list(range(rank, n_runs, world))
    size = math.ceil(n_runs / world)
    while len(own) < size:
        own.append(own[len(own) % max(len(own), 1)] if own else rank % n_runs)
    return own


def run_minibatches(n_runs: int, parts: int, seed: int, epoch: int) -> list[list[int]]:
    """The positions ``0..n_runs-1`` dealt into ``min(parts, n_runs)`` minibatches of sizes
    that differ by at most one, in an order drawn from ``seed`` and ``epoch``: each position in
    exactly one.

    >>> sorted(sum(run_minibatches(7, 3, seed=0, epoch=0), []))
    [0, 1, 2, 3, 4, 5, 6]
    >>> [len(part) for part in run_minibatches(7, 3, seed=0, epoch=0)]
    [3, 2, 2]
    """
    if n_runs < 1 or parts < 1:
        raise ValueError(f"need at least one run and one part, got {n_runs} and {parts}")
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(n_runs, generator=generator).tolist()
    parts = min(parts, n_runs)
    return [order[k::parts] for k in range(parts)]


def loss_normaliser(total_tokens: int, minibatches: int, world: int) -> float:
    """The one constant a round's summed token losses are divided by: its sampled tokens per
    minibatch and rank, so that a step's loss is on a per-token scale while every token of every
    run weighs the same (a per-run mean would weigh a short run's tokens more, a plain sum would
    make the step's size follow the round's length).

    >>> loss_normaliser(1200, 2, 1), loss_normaliser(1200, 3, 2)
    (600.0, 200.0)
    """
    if total_tokens < 1:
        raise ValueError("a round to train on has at least one sampled token")
    return total_tokens / (minibatches * world)


def per_run_kl(token_kl: Sequence[torch.Tensor]) -> float:
    """The mean over runs of each run's summed per-token KL estimates (one tensor per run)."""
    return float(sum(float(t.sum()) for t in token_kl) / len(token_kl)) if token_kl else 0.0


@dataclass(frozen=True)
class KlRule:
    """The module's rule for one update: ``budget`` nats per run, ``target_kl`` nats per token
    (0: none) for later epochs, ``minibatches`` steps an epoch."""

    budget: float
    target_kl: float
    minibatches: int

    def path(self, steps: int) -> float:
        """Where the first epoch's KL per run should be after ``steps`` of its steps."""
        return self.budget * (steps / self.minibatches) ** 2

    def first_epoch_scale(self, scale: float, steps: int, run_kl: float) -> float:
        """The learning-rate factor for the first epoch's next step, given the factor so far,
        the steps taken and the KL per run measured now.

        >>> rule = KlRule(budget=0.5, target_kl=0.0, minibatches=4)
        >>> rule.first_epoch_scale(1.0, 1, 0.01)  # under the path (0.03125): unchanged
        1.0
        >>> round(rule.first_epoch_scale(1.0, 2, 0.5), 3)  # 4x the path (0.125): halved
        0.5
        """
        target = self.path(steps)
        if steps < 1 or run_kl <= target:
            return scale
        return scale * math.sqrt(target / run_kl)

    def may_continue(self, steps: int, run_kl: float, token_kl: float) -> bool:
        """Whether a later epoch takes its next step after ``steps`` in all.

        >>> rule = KlRule(budget=0.5, target_kl=0.01, minibatches=2)
        >>> rule.may_continue(2, 0.2, 0.001), rule.may_continue(2, 0.3, 0.001)
        (True, False)
        >>> rule.may_continue(2, 0.1, 0.02)  # past the target per token
        False
        """
        if run_kl > self.budget * (steps / (steps + 1)) ** 2:
            return False
        return not (self.target_kl > 0 and token_kl > self.target_kl)
