"""The learner's command-line options: one per ``LearnerConfig`` field (``infra.settings_cli``),
its default from the config and its help here, so the CLI and the config cannot drift apart."""

from __future__ import annotations

import argparse

from infra.settings_cli import SettingsOptions
from trainer.learner_config import LearnerConfig

LEARNER_OPTIONS = SettingsOptions(
    LearnerConfig,
    options={
        "lr": "AdamW learning rate (the first epoch lowers it to stay inside the KL budget)",
        "epochs": "passes over every training run; after the first, only while the runs' KL "
        "stays inside the budget",
        "minibatches": "optimizer steps an epoch, 2 to 4, each over whole runs",
        "micro_batch": "calls per forward/backward (gradient accumulation up to a minibatch)",
        "clip": "PPO clip range", "tis_cap": "cap of the truncated importance weight",
        "kl_coef": "KL penalty to the lineage's first checkpoint (0: none)",
        "target_kl": "a later epoch stops past this KL per token from the parent (0: no "
        "such limit); the first epoch always runs to its end",
        "gate_kl_share": "share of the gate's KL limit per run (--max-kl) an epoch must end "
        "under: the KL budget the first epoch's learning rate is lowered to",
        "max_grad_norm": "gradient clipping norm", "weight_decay": "AdamW weight decay",
        "adv_scale": "what a run's reward less the mean of its task's other runs is divided "
        "by (reward units)",
        "mismatch_sample": "rollouts of each batch scored with the served weights to check "
        "its behaviour log-probs (0: no check)",
        "mismatch_round_max": "rollouts the mismatch check scores in a round in all, shared "
        "among its batches (at least 2 each; 0: no cap)",
        "max_mismatch_kl": "mismatch KL per token (|k1| or k3) past which a batch is "
        "quarantined, not trained on",
        "exact_behaviour_kl": "when every batch's mismatch k3 is within this, the "
        "recorded behaviour log-probs are pi_old and no scoring pass precedes the update "
        "(0: always score)",
        "seed": "deals the runs to minibatches", "save_every": "steps between saved round states, "
        "from which a killed round resumes (0: never)",
    },
)  # fmt: skip


def add_learner_args(p: argparse.ArgumentParser) -> None:
    """One option per LearnerConfig field, its default from the config itself."""
    LEARNER_OPTIONS.add_to(p)


def learner_from(args: argparse.Namespace) -> LearnerConfig:
    return LEARNER_OPTIONS.read(args)
