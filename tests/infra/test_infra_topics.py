"""``infra.topics.plan``: what ``rtrl topics apply`` would do, decided without a cluster."""

from __future__ import annotations

import pytest

from infra.topics import TOPICS, PartitionChangeRefused, TopicNames, plan

NAMES = TopicNames("acme.")


def _as_applied(replication: int) -> dict[str, tuple[int, dict[str, str]]]:
    """The cluster as a previous apply left it, plus configs Kafka reports on its own."""
    min_insync = 2 if replication >= 3 else 1
    return {
        NAMES.name(s.base): (s.partitions, {**s.configs(min_insync), "segment.bytes": "1073741824"})
        for s in TOPICS
    }


def _actions(existing, replication=1) -> dict[str, tuple[str, str]]:
    return {a.topic: (a.action, a.detail) for _, a in plan(existing, NAMES, replication)}


def test_empty_cluster_creates_every_declared_topic_under_the_prefix():
    actions = _actions({}, replication=3)
    assert set(actions) == {f"acme.{s.base}" for s in TOPICS}
    assert actions["acme.telemetry.events"] == ("create", "6 partitions, rf 3")
    assert actions["acme.telemetry.dlq"] == ("create", "1 partitions, rf 3")
    assert all(a == "create" for a, _ in actions.values())


def test_only_missing_topics_are_created():
    existing = _as_applied(1)
    del existing[NAMES.rollouts]
    actions = _actions(existing)
    assert actions.pop(NAMES.rollouts)[0] == "create"
    assert {a for a, _ in actions.values()} == {"unchanged"}


def test_applied_cluster_is_unchanged_and_undeclared_configs_are_ignored():
    assert {a for a, _ in _actions(_as_applied(1)).values()} == {"unchanged"}
    assert {a for a, _ in _actions(_as_applied(3), replication=3).values()} == {"unchanged"}


def test_config_drift_is_detected_and_named():
    existing = _as_applied(1)
    existing[NAMES.events][1]["retention.ms"] = "1000"
    existing[NAMES.rewards][1]["cleanup.policy"] = "delete"
    actions = _actions(existing)
    assert actions[NAMES.events] == ("update-config", "retention.ms=604800000")
    assert actions[NAMES.rewards] == ("update-config", "cleanup.policy=compact")
    assert actions[NAMES.dlq] == ("unchanged", "")


def test_min_insync_follows_replication():
    # Topics applied for one node drift when the cluster is declared with replication 3.
    actions = _actions(_as_applied(1), replication=3)
    assert {d for _, d in actions.values()} == {"min.insync.replicas=2"}


def test_partition_change_is_refused_with_the_reason():
    existing = _as_applied(1)
    existing[NAMES.events] = (12, existing[NAMES.events][1])
    with pytest.raises(PartitionChangeRefused) as refused:
        plan(existing, NAMES, 1)
    text = str(refused.value)
    assert "acme.telemetry.events has 12 partitions but is declared with 6" in text
    assert "co-partitioning" in text and "prefix" in text


def test_names_of_undeclared_topics_are_an_error():
    with pytest.raises(KeyError):
        NAMES.name("telemetry.typo")
    assert TopicNames().events == "telemetry.events"
    assert NAMES.checkpoints == "acme.checkpoints"
