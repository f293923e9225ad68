"""Every topic of events-v1.md, declared once, and applied to a cluster idempotently.

Partition counts are part of the contract: keys map to partitions by hash, and the stream
joins inputs co-partitioned by ``interaction_id``. So ``apply`` creates what is missing and
aligns configs, but refuses to change the partition count of an existing topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    base: str  # the name in events-v1.md
    partitions: int
    cleanup: str  # "delete" or "compact"
    retention_ms: int | None  # None: compacted topics keep the latest value per key forever
    purpose: str
    extra: dict[str, str] = field(default_factory=dict)

    def configs(self, min_insync: int) -> dict[str, str]:
        conf = {"cleanup.policy": self.cleanup, "min.insync.replicas": str(min_insync)}
        if self.retention_ms is not None:
            conf["retention.ms"] = str(self.retention_ms)
        conf.update(self.extra)
        return conf


# The joined inputs (telemetry.events, rollouts) and what is keyed like them share one count.
JOIN_PARTITIONS = 6

TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(
        "telemetry.events",
        JOIN_PARTITIONS,
        "delete",
        7 * DAY_MS,
        "valid events with received_at, keyed by interaction_id",
    ),
    TopicSpec(
        "telemetry.dlq", 1, "delete", 14 * DAY_MS, "rejected bytes with a reason code and detail"
    ),
    TopicSpec(
        "telemetry.late",
        JOIN_PARTITIONS,
        "delete",
        7 * DAY_MS,
        "events that arrived after their interaction's window",
    ),
    TopicSpec(
        "rewards",
        JOIN_PARTITIONS,
        "compact",
        None,
        "reward records (latest revision per interaction_id)",
        {"min.compaction.lag.ms": str(DAY_MS)},
    ),
    TopicSpec(
        "rollouts",
        JOIN_PARTITIONS,
        "delete",
        7 * DAY_MS,
        "what the serving side generated, keyed by interaction_id",
    ),
    TopicSpec("checkpoints", 1, "compact", None, "published checkpoints keyed by checkpoint_id"),
    TopicSpec("batches", 1, "compact", None, "training batches ready for the trainer"),
)


@dataclass(frozen=True)
class TopicNames:
    """The concrete names of the platform's topics; a prefix isolates tenants of one cluster
    (and tests from each other)."""

    prefix: str = ""

    def name(self, base: str) -> str:
        if base not in {t.base for t in TOPICS}:
            raise KeyError(f"no topic {base!r} is declared")
        return f"{self.prefix}{base}"

    @property
    def events(self) -> str:
        return self.name("telemetry.events")

    @property
    def dlq(self) -> str:
        return self.name("telemetry.dlq")

    @property
    def late(self) -> str:
        return self.name("telemetry.late")

    @property
    def rewards(self) -> str:
        return self.name("rewards")

    @property
    def rollouts(self) -> str:
        return self.name("rollouts")

    @property
    def checkpoints(self) -> str:
        return self.name("checkpoints")

    @property
    def batches(self) -> str:
        return self.name("batches")


@dataclass(frozen=True)
class TopicAction:
    topic: str
    action: str  # "create", "update-config", "unchanged"
    detail: str = ""


class PartitionChangeRefused(RuntimeError):
    pass


def plan(
    existing: dict[str, tuple[int, dict[str, str]]],
    names: TopicNames,
    replication: int,
) -> list[tuple[TopicSpec, TopicAction]]:
    """Decide, without touching the cluster, what ``apply`` must do. Pure.

    ``existing`` maps topic name -> (partition count, its current configs).
    """
    min_insync = 2 if replication >= 3 else 1
    steps: list[tuple[TopicSpec, TopicAction]] = []
    for spec in TOPICS:
        name = names.name(spec.base)
        want = spec.configs(min_insync)
        if name not in existing:
            steps.append(
                (
                    spec,
                    TopicAction(name, "create", f"{spec.partitions} partitions, rf {replication}"),
                )
            )
            continue
        partitions, current = existing[name]
        if partitions != spec.partitions:
            raise PartitionChangeRefused(
                f"{name} has {partitions} partitions but is declared with {spec.partitions}. "
                "Changing the count would move keys to other partitions and break per-"
                "interaction ordering and co-partitioning of joined topics; rtrl refuses. "
                "Create new topics with a prefix and migrate, or change the declaration back."
            )
        drift = {k: v for k, v in want.items() if current.get(k) != v}
        if drift:
            steps.append(
                (
                    spec,
                    TopicAction(
                        name,
                        "update-config",
                        ", ".join(f"{k}={v}" for k, v in sorted(drift.items())),
                    ),
                )
            )
        else:
            steps.append((spec, TopicAction(name, "unchanged")))
    return steps
