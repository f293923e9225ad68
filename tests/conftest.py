"""Fixtures: a real Kafka broker for the whole session, unique topics per test.

Set ``KAFKA_BOOTSTRAP_SERVERS`` to use an existing cluster; otherwise the session starts a
single node with the project's own scripts (`infra.broker`) on a free port and stops it at
the end. Tests that use ``kafka_bootstrap`` are marked ``kafka`` automatically, so
``pytest -m "not kafka"`` runs the pure-logic tests alone.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.settings import BOOTSTRAP_ENV
from infra.topics import TopicNames
from tests.kafka_helpers import free_port_block

REPO = Path(__file__).resolve().parent.parent
# No test reaches a model hub; models are built here or fetched from the package registry.
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "kafka_bootstrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get(BOOTSTRAP_ENV)
    if existing:
        yield existing
        return
    layout = ClusterLayout(tmp_path_factory.mktemp("kafka"), port=free_port_block(2), nodes=1)
    bootstrap = broker.start(layout, default_cache_root(os.environ))
    try:
        yield bootstrap
    finally:
        broker.stop(layout)


@pytest.fixture
def topic_names(kafka_bootstrap: str) -> TopicNames:
    """Every declared topic, created fresh under a prefix unique to this test."""
    from infra.topics_apply import apply_topics

    names = TopicNames(prefix=f"t{uuid.uuid4().hex[:10]}.")
    apply_topics(kafka_bootstrap, names, replication=1)
    return names
