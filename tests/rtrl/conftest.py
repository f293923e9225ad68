"""Fixtures of the ``rtrl`` tests (console script, run loop, simulator, report page): the shared
ones from ``tests/conftest.py``; ``browser`` renders the report page in headless Chromium."""

from pathlib import Path

import pytest

from checkpoints.store import CheckpointRegistry
from infra.topics import TopicNames
from rtrl.run.gateway import GatewaySetup
from tests.support.checkpoints import register_variant
from tests.support.gateway import api_key
from tests.support.kafka import free_port_block


@pytest.fixture
def ab_gateway(
    tmp_path: Path, registry: CheckpointRegistry, kafka_bootstrap: str, topic_names: TopicNames
) -> GatewaySetup:
    """The closing A/B's gateway: `rtrl serve` on the suite's broker, over the registry's
    ``t-0000`` and a variant of it, ``t-0001``, with an API key in its key store."""
    register_variant(registry, "t-0001", "t-0000", seed=3)
    return GatewaySetup(
        str(registry.root),
        str(tmp_path / "keys.sqlite"),
        ["--bootstrap", kafka_bootstrap, "--topic-prefix", topic_names.prefix],
        free_port_block(1),
        api_key(tmp_path / "keys.sqlite"),
        seed=5,
    )
