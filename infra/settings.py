"""Kafka client settings shared by every stage: one place that says how rtrl talks to Kafka.

Producers that accept events for the platform are idempotent with ``acks=all``: a send is
acknowledged only once every in-sync replica has it, and retries never write a copy twice.
Every producer places keys with murmur2, as Java, aiokafka and Faust do, so that topics
written by different clients stay co-partitioned. Consumers never auto-commit: each stage
commits an offset only after the work for it is durable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"


def resolve_bootstrap(cli_value: str | None, environ: Mapping[str, str]) -> str:
    """``--bootstrap`` wins, then ``KAFKA_BOOTSTRAP_SERVERS``, then the local default.

    >>> resolve_bootstrap(None, {})
    '127.0.0.1:9092'
    >>> resolve_bootstrap(None, {"KAFKA_BOOTSTRAP_SERVERS": "k:1"})
    'k:1'
    >>> resolve_bootstrap("a:2", {"KAFKA_BOOTSTRAP_SERVERS": "k:1"})
    'a:2'
    """
    if cli_value:
        return cli_value
    return environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


def reliable_producer(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """confluent-kafka settings for a producer whose acknowledged writes survive a broker loss."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
        "message.timeout.ms": 30_000,
        # Java, aiokafka and Faust place keys with murmur2; librdkafka's default is CRC32. The
        # same key must land on the same partition whoever writes it (co-partitioned joins).
        "partitioner": "murmur2_random",
    }
    conf.update(overrides)
    return conf


def manual_commit_consumer(bootstrap: str, group_id: str, **overrides: Any) -> dict[str, Any]:
    """confluent-kafka settings for a consumer that commits only what its caller made durable."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    }
    conf.update(overrides)
    return conf


def admin(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap}
