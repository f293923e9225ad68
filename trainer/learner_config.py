"""How one update trains: the learner's settings, typed and checked, apart from torch so that
`rtrl train --help` (which lists one option per field) loads no model library."""

from __future__ import annotations

import math
from dataclasses import dataclass


def _positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"LearnerConfig.{name} must be an integer >= 1, got {value!r}")


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class LearnerConfig:
    """How one update trains; stored with the checkpoint it produced."""

    lr: float = 1e-5  # AdamW learning rate (LoRA adapters take ~10x more)
    # passes over every training run; a pass after the first goes on only while the runs' KL
    # stays under the budget below (trainer.epochs)
    epochs: int = 2
    minibatches: int = 2  # optimizer steps an epoch, 2 to 4, each over whole runs
    micro_batch: int = 8  # calls per forward/backward; gradients accumulate to a minibatch
    clip: float = 0.2  # PPO keeps pi / pi_old in [1 - clip, 1 + clip]
    tis_cap: float = 2.0  # truncated importance weight min(pi_old / mu, cap)
    kl_coef: float = 0.0  # penalty on KL(pi || reference) per token; 0: no reference needed
    # (estimated from the behaviour policy's tokens with the importance ratio pi / mu, truncated
    # at tis_cap: losses.kl_penalty)
    # a later epoch stops once KL(pi_old || pi) per token passes it (0: no such limit); it never
    # cuts the first epoch short
    target_kl: float = 0.0
    # the epoch's KL budget, a share of the gate's limit on KL(behaviour || candidate) per run
    # (GateConfig.max_kl): the first epoch's learning rate is lowered so its runs' KL per run
    # follows a path that ends under this share of it, and a later epoch's step is taken only
    # while that holds (trainer.epochs)
    gate_kl_share: float = 0.5
    max_grad_norm: float = 1.0  # gradients are clipped to this global norm
    weight_decay: float = 0.0
    # what a run's reward less the mean of the other runs of its task is divided by (reward
    # units; trainer.advantages): a constant, so no run's own reward enters its scale
    adv_scale: float = 1.0
    # the train/serve mismatch check (trainer.mismatch): rollouts of each batch scored with the
    # served weights before training (0: no check), and the mismatch KL in nats per token past
    # which the batch is quarantined (prime-rl asks < 0.015 of a healthy run; raw log-probs at
    # T = 0.7 give 0.03 to 0.6 on the test models)
    mismatch_sample: int = 64
    # and at most this many of a round's rollouts in all, shared evenly among its batches (at
    # least MIN_PER_BATCH each, trainer.mismatch.per_batch_sample; 0: no cap): a service's
    # round of many small batches would otherwise score nearly all of them, as long as the
    # scoring pass an exact engine lets it skip (SmolLM2 soak: 7 minutes, 21 batches)
    mismatch_round_max: int = 64
    max_mismatch_kl: float = 0.02
    # pi_old without a scoring pass: when the mismatch check measured the recorded behaviour
    # log-probs within this many nats per token of the served weights' (k3), the round
    # takes them as pi_old instead of scoring every example first (0: always score). An engine
    # serving the learner's own weights records them to ~1e-5; the 4-bit file's are ~4e-3 apart
    exact_behaviour_kl: float = 0.0
    seed: int = 0  # deals the runs to minibatches; same seed and inputs, same weights
    save_every: int = 10  # optimizer steps between saved round states (0: never)

    def __post_init__(self) -> None:
        if not _finite(self.lr) or self.lr <= 0:
            raise ValueError(f"LearnerConfig.lr must be a finite number > 0, got {self.lr!r}")
        for name in ("epochs", "minibatches", "micro_batch"):
            _positive_int(name, getattr(self, name))
        if not 2 <= self.minibatches <= 4:
            raise ValueError(f"LearnerConfig.minibatches must be 2 to 4, got {self.minibatches!r}")
        if not _finite(self.clip) or not 0 < self.clip < 1:
            raise ValueError(f"LearnerConfig.clip must be in (0, 1), got {self.clip!r}")
        if not _finite(self.tis_cap) or self.tis_cap < 1:
            raise ValueError(f"LearnerConfig.tis_cap must be >= 1, got {self.tis_cap!r}")
        for name in (
            "kl_coef",
            "target_kl",
            "weight_decay",
            "max_mismatch_kl",
            "exact_behaviour_kl",
        ):
            value = getattr(self, name)
            if not _finite(value) or value < 0:
                raise ValueError(
                    f"LearnerConfig.{name} must be a finite number >= 0, got {value!r}"
                )
        if not _finite(self.max_grad_norm) or self.max_grad_norm <= 0:
            raise ValueError(
                "LearnerConfig.max_grad_norm must be a finite number > 0, "
                f"got {self.max_grad_norm!r}"
            )
        if not _finite(self.gate_kl_share) or not 0 < self.gate_kl_share <= 1:
            raise ValueError(
                f"LearnerConfig.gate_kl_share must be in (0, 1], got {self.gate_kl_share!r}"
            )
        if not _finite(self.adv_scale) or self.adv_scale <= 0:
            raise ValueError(
                f"LearnerConfig.adv_scale must be a finite number > 0, got {self.adv_scale!r}"
            )
        for name in ("seed", "save_every", "mismatch_sample", "mismatch_round_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"LearnerConfig.{name} must be an integer >= 0, got {value!r}")
