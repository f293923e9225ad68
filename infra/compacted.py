"""Read a compacted topic as a table: the latest value of every key, as of now.

``batches`` and ``checkpoints`` are announcements keyed by id on compacted topics; a reader wants
what each id says last. This reads every partition from its first offset to the end offset it had
when the call started (what arrives later waits for the next read, so it returns even while
others keep producing), without a consumer group and without committing anything. A tombstone
(null value) removes its key, so the answer is the same before and after compaction.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from infra.kafka_security import KafkaSecurity
from infra.settings import manual_commit_consumer

READER_GROUP_PREFIX = "rtrl-read-"
"""The group id of every reader starts so (it commits nothing; ACLs grant the prefix)."""

# Errors of a partition between leaders (as right after the topic was created): worth a retry.
_LEADER_MOVING = {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION}


def read_latest(
    bootstrap: str, topic: str, timeout_s: float = 30.0, security: KafkaSecurity | None = None
) -> dict[bytes, bytes]:
    """The latest value per key of ``topic`` (keyless messages are skipped), read as the
    process's Kafka identity or ``security``'s.

    Raises KafkaException when it cannot be read to its end within ``timeout_s`` (unreachable
    cluster, unknown topic, an ACL refusing it).
    """
    deadline = time.monotonic() + timeout_s
    consumer = Consumer(
        manual_commit_consumer(bootstrap, f"{READER_GROUP_PREFIX}{uuid.uuid4()}", security)
    )
    try:
        ends = _offsets(consumer, topic, deadline)
        pending = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in sorted(pending)])
        latest: dict[bytes, bytes] = {}
        while pending:
            if time.monotonic() > deadline:
                raise KafkaException(
                    KafkaError(
                        KafkaError._TIMED_OUT,
                        f"{topic}: partitions "
                        f"{sorted(pending)} not read to their end in {timeout_s:g} s",
                    )
                )
            for message in consumer.consume(1000, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    continue
                key, value, offset = message.key(), message.value(), message.offset()
                partition = message.partition()
                if key is None or offset is None or partition is None:
                    continue
                if offset >= ends[partition][1]:
                    continue  # after the snapshot: the next read's
                if value is None:
                    latest.pop(key, None)
                else:
                    latest[key] = value
            # by position, not by the last message: compaction may have removed the last offsets
            for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset is not None and tp.offset >= ends[tp.partition][1]:
                    pending.discard(tp.partition)
        return latest
    finally:
        consumer.close()


def _offsets(consumer: Consumer, topic: str, deadline: float) -> dict[int, tuple[int, int]]:
    """(first, next) offset of every partition as the topic stands now; a topic created a moment
    ago may have no leader yet, which is waited for until the deadline."""
    while True:
        try:
            found = consumer.list_topics(topic, timeout=_left(deadline)).topics.get(topic)
            if found is None:
                raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, topic))
            if found.error is not None:
                raise KafkaException(found.error)
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=_left(deadline))
                for p in found.partitions
            }
        except KafkaException as exc:
            if exc.args[0].code() not in _LEADER_MOVING or _left(deadline) <= 0.2:
                raise
            time.sleep(0.2)


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)
