"""Who may do what on a secured cluster: each service's Kafka permissions, as data.

One SCRAM user per service, and for each only what its stage reads and writes (least privilege):
a leaked collector credential can add events, never read rewards or announce a checkpoint. The
rows follow each stage's own Kafka calls:

* collector (``ingest.collector.kafka_sink``): writes ``telemetry.events`` and ``telemetry.dlq``.
* stream worker (``streams``): reads ``telemetry.events`` in its consumer group; writes
  ``rewards``, ``telemetry.late`` and ``telemetry.dlq``; Faust creates, reads and writes its own
  topics (the table's changelog, its leader topic), all named after its app id, which is also
  the group's.
* sink (``warehouse.sink``): reads ``rewards``, ``telemetry.events``, ``rollouts``,
  ``telemetry.late``, ``telemetry.dlq`` and ``checkpoints`` in its group.
* batch builder (``warehouse.batches``): reads and writes ``batches``.
* trainer (``trainer.inputs``, ``checkpoints.publish``; also ``rtrl canary decide --publish``
  of ``release``, which announces on the same topic): reads ``batches``; reads and writes
  ``checkpoints``.
* serving (``serving``, the gateway ``rtrl serve``): writes ``rollouts``; reads ``checkpoints``
  (``serving.follower``).

Readers of a compacted topic as a table (``infra.compacted``) take a throwaway group id under
``rtrl-read-``; every service that reads one may use that prefix. Pure: ``infra.secure`` applies
these with the admin API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.compacted import READER_GROUP_PREFIX
from infra.topics import TopicNames

Operation = Literal["READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALL"]
ResourceKind = Literal["TOPIC", "GROUP"]
Pattern = Literal["LITERAL", "PREFIXED"]


@dataclass(frozen=True)
class Grant:
    """One ALLOW rule: ``operation`` on the resource ``kind``/``name`` (``pattern``)."""

    kind: ResourceKind
    name: str
    operation: Operation
    pattern: Pattern = "LITERAL"


@dataclass(frozen=True)
class ServiceAccess:
    """A service's Kafka identity and what it may touch."""

    user: str
    grants: tuple[Grant, ...]


STREAM_GROUP = "rtrl-stream"
"""The stream worker's group and Faust app id start so (``rtrl-stream-<topic prefix>``, see
``streams.cli``), and so do the topics Faust makes for it."""
SINK_GROUP = "rtrl-warehouse-sink"  # warehouse.sink.SinkConfig.group_id
SERVING_GROUP = "rtrl-serving"  # serving.follower.CheckpointFollower


def _writes(*topics: str) -> tuple[Grant, ...]:
    return tuple(Grant("TOPIC", t, op) for t in topics for op in ("WRITE", "DESCRIBE"))


def _reads(*topics: str) -> tuple[Grant, ...]:
    return tuple(Grant("TOPIC", t, "READ") for t in topics)


def _group(name: str, pattern: Pattern = "LITERAL") -> tuple[Grant, ...]:
    return (Grant("GROUP", name, "READ", pattern),)


def service_access(names: TopicNames) -> tuple[ServiceAccess, ...]:
    """Every service's user and grants for the topics ``names`` gives.

    >>> by_user = {s.user: s for s in service_access(TopicNames())}
    >>> sorted(by_user)
    ['batches', 'collector', 'serving', 'sink', 'stream', 'trainer']
    >>> sorted({g.name for g in by_user["collector"].grants})
    ['telemetry.dlq', 'telemetry.events']
    """
    t = names
    readers = _group(READER_GROUP_PREFIX, "PREFIXED")
    return (
        ServiceAccess("collector", _writes(t.events, t.dlq)),
        ServiceAccess(
            "stream",
            _reads(t.events)
            + _writes(t.rewards, t.late, t.dlq)
            + _group(STREAM_GROUP, "PREFIXED")
            + (Grant("TOPIC", STREAM_GROUP, "ALL", "PREFIXED"),),
        ),
        ServiceAccess(
            "sink",
            _reads(t.rewards, t.events, t.rollouts, t.late, t.dlq, t.checkpoints)
            + _group(SINK_GROUP),
        ),
        ServiceAccess("batches", _reads(t.batches) + _writes(t.batches) + readers),
        ServiceAccess(
            "trainer", _reads(t.batches, t.checkpoints) + _writes(t.checkpoints) + readers
        ),
        ServiceAccess(
            "serving", _writes(t.rollouts) + _reads(t.checkpoints) + _group(SERVING_GROUP) + readers
        ),
    )
