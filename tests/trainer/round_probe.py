"""A training round in its own process, for the tests that kill it: ``python -m
tests.trainer.round_probe REGISTRY BATCH_FILE CANDIDATE_ID``."""

from __future__ import annotations

import sys
from pathlib import Path

from checkpoints.store import CheckpointRegistry
from release.gate import GateConfig
from tests.support.rounds import round_options
from trainer.learner import LearnerConfig
from trainer.train import train_round

LEARNER = LearnerConfig(lr=5e-3, epochs=8, minibatches=4, micro_batch=4, save_every=1)


def main(argv: list[str]) -> None:
    registry, batch, candidate = CheckpointRegistry(Path(argv[0])), Path(argv[1]), argv[2]
    train_round(
        registry,
        "t-0000",
        [("b", [batch])],
        candidate,
        round_options(registry, LEARNER, GateConfig(min_gain=-100, max_kl=100)),
        alarms=[],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
