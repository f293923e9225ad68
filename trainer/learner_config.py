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
    epochs: int = 2  # passes over the round's examples
    minibatch: int = 32  # examples per optimizer step
    micro_batch: int = 8  # examples per forward/backward; gradients accumulate to a minibatch
    clip: float = 0.2  # PPO keeps pi / pi_old in [1 - clip, 1 + clip]
    tis_cap: float = 2.0  # truncated importance weight min(pi_old / mu, cap)
    kl_coef: float = 0.0  # penalty on KL(pi || reference) per token; 0: no reference needed
    # (estimated from the behaviour policy's tokens with the importance ratio pi / mu, truncated
    # at tis_cap: losses.kl_penalty)
    target_kl: float = 0.0  # stop the update once KL(pi_old || pi) passes it; 0: never
    max_grad_norm: float = 1.0  # gradients are clipped to this global norm
    weight_decay: float = 0.0
    baseline_decay: float = 0.9  # how much of the running baseline a new batch keeps
    # the smallest reward spread an advantage is divided by (reward units): a group or running
    # baseline whose rewards were all equal has spread 0, and |advantage| stays below
    # |reward - baseline| / adv_std_floor (0.1: a tenth of the taste rewards' unit scale)
    adv_std_floor: float = 0.1
    # the train/serve mismatch check (trainer.mismatch): rollouts of each batch scored with the
    # served weights before training (0: no check), and the mismatch KL in nats per token past
    # which the batch is quarantined (prime-rl asks < 0.015 of a healthy run; raw log-probs at
    # T = 0.7 give 0.03 to 0.6 on the test models)
    mismatch_sample: int = 64
    max_mismatch_kl: float = 0.02
    # pi_old without a scoring pass: when the mismatch check measured the recorded behaviour
    # log-probs within this many nats per token of the served weights' (k3), the round
    # takes them as pi_old instead of scoring every example first (0: always score). An engine
    # serving the learner's own weights records them to ~1e-5; the 4-bit file's are ~4e-3 apart
    exact_behaviour_kl: float = 0.0
    seed: int = 0  # orders the minibatches; same seed and inputs, same weights
    save_every: int = 10  # optimizer steps between saved round states (0: never)

    def __post_init__(self) -> None:
        if not _finite(self.lr) or self.lr <= 0:
            raise ValueError(f"LearnerConfig.lr must be a finite number > 0, got {self.lr!r}")
        for name in ("epochs", "minibatch", "micro_batch"):
            _positive_int(name, getattr(self, name))
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
        if not _finite(self.baseline_decay) or not 0 <= self.baseline_decay < 1:
            raise ValueError(
                f"LearnerConfig.baseline_decay must be in [0, 1), got {self.baseline_decay!r}"
            )
        if not _finite(self.adv_std_floor) or self.adv_std_floor <= 0:
            raise ValueError(
                "LearnerConfig.adv_std_floor must be a finite number > 0, "
                f"got {self.adv_std_floor!r}"
            )
        for name in ("seed", "save_every", "mismatch_sample"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"LearnerConfig.{name} must be an integer >= 0, got {value!r}")
