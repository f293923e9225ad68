"""The fixtures that several stages' tests share; each stage's own are in its folder's
``conftest.py``, and plain helper functions shared across stages in ``tests/support/``.

A real Kafka broker for the whole session, unique topics per test, a collector on that broker,
the tiny model (built once per session from a config and a tokenizer trained here), a
checkpoint registry rooted at it, and `rtrl serve` on it (``served``, set apart per module by
overriding ``served_setup``).

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
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # the gateway's pieces import torch: each fixture imports them when used
    import openai

    from tests.support.gateway import Serve, ServedSetup

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
    from tests.support.gateway import tiny_registry

    return tiny_registry(tmp_path / "ckpt", tiny_model)


@pytest.fixture(scope="module")
def served_setup() -> ServedSetup:
    """What a module's ``served`` gateway has of its own; a module overrides this fixture to
    set options, another model or recording."""
    from tests.support.gateway import ServedSetup

    return ServedSetup()


@pytest.fixture(scope="session")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory,
                   tiny_model: Path) -> Iterator[tuple[Serve, str]]:  # fmt: skip
    """`rtrl serve` on the tiny model as it comes (nothing recorded or followed), one for the
    session's modules that set nothing of their own. Shared because it holds nothing a test
    owns: it records nothing, its callers are told apart by their own user keys and interaction
    ids, and its counters are read as differences across one test's calls."""
    from tests.support.gateway import serve_tiny

    serve, key = serve_tiny(tmp_path_factory.mktemp("shared-serve"), tiny_model)
    try:
        yield serve, key
    finally:
        serve.stop()


@pytest.fixture(scope="module")
def served(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    tiny_model: Path,
    served_setup: ServedSetup,
) -> Iterator[tuple[Serve, str]]:
    """`rtrl serve` on the tiny model for a module's tests, and an API key: the shared one
    where the module sets nothing (``served_setup``), else one of its own for the module."""
    from tests.support.gateway import ServedSetup, serve_tiny

    if served_setup == ServedSetup():
        yield request.getfixturevalue("shared_gateway")
        return
    model = served_setup.model or tiny_model
    serve, key = serve_tiny(tmp_path_factory.mktemp("serve"), model, *served_setup.options,
                            record_to=served_setup.record_to)  # fmt: skip
    try:
        yield serve, key
    finally:
        serve.stop()


@pytest.fixture(scope="module")
def client(served: tuple[Serve, str]) -> openai.OpenAI:
    """The official client on the module's ``served`` gateway, with its key, never retrying."""
    import openai

    serve, key = served
    return openai.OpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0)
