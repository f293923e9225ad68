"""Apply the declared topics to a real cluster with Kafka's admin API."""

from __future__ import annotations

import logging

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from infra.kafka_security import KafkaSecurity
from infra.settings import admin
from infra.topics import TopicAction, TopicNames, plan

log = logging.getLogger(__name__)


def describe_existing(
    client: AdminClient, timeout: float = 15
) -> dict[str, tuple[int, dict[str, str]]]:
    md = client.list_topics(timeout=timeout)
    names = [n for n in md.topics if not n.startswith("__")]
    if not names:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    configs = {}
    for res, fut in client.describe_configs(resources).items():
        entries = fut.result(timeout=timeout)
        configs[res.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    return {n: (len(md.topics[n].partitions), configs.get(n, {})) for n in names}


def apply_topics(
    bootstrap: str,
    names: TopicNames | None = None,
    replication: int | None = None,
    timeout: float = 30,
    security: KafkaSecurity | None = None,
) -> list[TopicAction]:
    """Create missing topics and align configs; refuse partition changes. Idempotent."""
    names = names or TopicNames()
    client = AdminClient(admin(bootstrap, security))
    if replication is None:
        replication = min(3, len(client.list_topics(timeout=timeout).brokers))
    steps = plan(describe_existing(client, timeout), names, replication)
    min_insync = 2 if replication >= 3 else 1
    creates = [
        NewTopic(
            a.topic,
            num_partitions=s.partitions,
            replication_factor=replication,
            config=s.configs(min_insync),
        )
        for s, a in steps
        if a.action == "create"
    ]
    if creates:
        for name, fut in client.create_topics(creates, operation_timeout=timeout).items():
            fut.result(timeout=timeout)
            log.info("created topic %s", name)
    for spec, action in steps:
        if action.action != "update-config":
            continue
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in spec.configs(min_insync).items()
        ]
        res = ConfigResource(ConfigResource.Type.TOPIC, action.topic, incremental_configs=entries)
        for fut in client.incremental_alter_configs([res]).values():
            fut.result(timeout=timeout)
        log.info("updated configs of %s: %s", action.topic, action.detail)
    return [a for _, a in steps]
