"""Where a consumer group resumes reading a partition: its committed offset, or the log start.

After each rebalance Faust seeks every assigned partition to its committed offset (the log start
when there is none, ``auto_offset_reset=earliest``; the log start too when retention already
deleted the committed one). The offset guard (``streams.offsets``) needs the same numbers, and
asks the broker for them itself rather than reading Faust's private bookkeeping. Between the
seek and the worker's first ack of the new generation nothing commits for these partitions, so
the answer is the offset the consumer was sought to.
"""

from __future__ import annotations

import asyncio

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from infra.settings import admin

TIMEOUT_S = 30.0


def resume_offsets(admin: AdminClient, group: str, topic: str,
                   partitions: list[int]) -> dict[int, int]:  # fmt: skip
    """max(committed offset, log start offset) per partition (blocking)."""
    if not partitions:
        return {}
    tps = [TopicPartition(topic, p) for p in partitions]
    request = [ConsumerGroupTopicPartitions(group, tps)]
    committed_result = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)
    committed = {
        tp.partition: tp.offset for tp in committed_result[group].result(TIMEOUT_S).topic_partitions
    }
    earliest_result = admin.list_offsets(
        {tp: OffsetSpec.earliest() for tp in tps}, request_timeout=TIMEOUT_S
    )
    earliest = {
        tp.partition: future.result(TIMEOUT_S).offset for tp, future in earliest_result.items()
    }
    # A partition without a committed offset reports a negative one (OFFSET_INVALID).
    return {p: max(committed.get(p, -1), earliest[p]) for p in partitions}


class ResumeOffsets:
    """The query above, off the event loop, with one admin client for the worker's life."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self._admin: AdminClient | None = None  # on first use: building an app connects nowhere

    async def fetch(self, partitions: list[int]) -> dict[int, int]:
        if self._admin is None:
            self._admin = AdminClient(admin(self.bootstrap))
        return await asyncio.to_thread(
            resume_offsets, self._admin, self.group, self.topic, partitions
        )
