"""The fixtures that several stages' tests share; each stage's own are in its folder's
``conftest.py``, and plain helper functions shared across stages in ``tests/support/``.

A real Kafka broker for the whole session, unique topics per test, a collector on that broker,
the tiny model (built once per session from a config and a tokenizer trained here) and a
checkpoint registry rooted at it.

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

from checkpoints.store import CheckpointRegistry
from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.settings import BOOTSTRAP_ENV
from infra.topics import TopicNames
from tests.support.collector import CollectorHandle, make_collector
from tests.support.kafka import free_port_block
from tests.support.schedule import longest_first

REPO = Path(__file__).resolve().parent.parent
# No test reaches a model hub; models are built here or fetched from the package registry.
os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "kafka_bootstrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
    items[:] = longest_first(items)  # the workers' order (scripts/test: --no-loadscope-reorder)


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


@pytest.fixture
def collector(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> Iterator[CollectorHandle]:
    """A collector in this process on the session broker, with keys for ORG and OTHER_ORG."""
    handle = make_collector(kafka_bootstrap, topic_names, tmp_path)
    try:
        yield handle
    finally:
        handle.running.stop()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.tiny_model import ensure_tiny_model

    return ensure_tiny_model(tmp_path_factory.mktemp("models"))


@pytest.fixture
def registry(tmp_path: Path, tiny_model: Path) -> CheckpointRegistry:
    """A registry whose root checkpoint ``t-0000`` is the tiny model."""
    from checkpoints.weights import register_base

    registry = CheckpointRegistry(tmp_path / "ckpt")
    register_base(registry, "t-0000", tiny_model)
    return registry
