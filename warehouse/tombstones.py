"""Erase a forgotten user's reward records from the compacted ``rewards`` topic.

``rewards`` is compacted: it keeps the latest record of every interaction for good, user id
included. A tombstone (a null value under the same key, on the same partition) makes compaction
delete every earlier record of that key, and then, after ``delete.retention.ms``, the tombstone
itself. The producer is the platform's (murmur2 partitioner, like the stream worker that wrote
the records), so each tombstone lands on its records' partition.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer


class TombstoneError(Exception):
    """Kafka did not acknowledge every tombstone."""


def tombstone_rewards(bootstrap: str, topic: str, keys: Iterable[str],
                      timeout_s: float = 30.0) -> int:  # fmt: skip
    """Send a tombstone per key and wait for every acknowledgement; return how many.

    The keys are the records' (``rewards.tenant_keys.rewards_key``, and for records written
    before the topic was keyed by organisation the bare interaction id: ``forget.tombstone_keys``).
    """
    timeout = {"message.timeout.ms": int(timeout_s * 1000)}
    producer = Producer(reliable_producer(bootstrap, **timeout))
    failures: list[KafkaError] = []

    def note(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    sent = 0
    for key in sorted(set(keys)):
        producer.produce(topic, value=None, key=key.encode(), on_delivery=note)
        producer.poll(0)
        sent += 1
    left = producer.flush(timeout_s + 5)
    if left or failures:
        reason = failures[0].str() if failures else f"{left} not acknowledged in time"
        raise TombstoneError(f"{len(failures) + left} of {sent} tombstones failed: {reason}")
    return sent
