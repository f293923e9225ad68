"""A training round's settings for the tests that call ``trainer.train.train_round`` directly,
without ``rtrl train``: the fields only the command reads (its warehouse, Kafka, topics) are
placeholders, the rest as given or their defaults."""

from __future__ import annotations

from typing import Any

from checkpoints.store import CheckpointRegistry
from infra.topics import TopicNames
from release.gate import GateConfig
from trainer.learner_config import LearnerConfig
from trainer.round_options import RoundOptions


def round_options(registry: CheckpointRegistry, learner: LearnerConfig, gate: GateConfig,
                  **settings: Any) -> RoundOptions:  # fmt: skip
    return RoundOptions(registry=registry.root, warehouse=registry.root, bootstrap="",
                        topics=TopicNames(), learner=learner, gate=gate, **settings)  # fmt: skip
