"""Every write of the stream worker, changelog and outputs alike, through one C producer, with a
wait that ends only when Kafka acknowledged all of them.

Faust's producer (aiokafka) costs pure Python per message, and its ``flush()`` can return with
writes still queued (``ProducerBuffer.flush_atmost`` gives up after 0.1 s without progress). A
confluent-kafka producer batches in librdkafka, and :meth:`Outbox.durable` waits on librdkafka's
own count of writes not yet acknowledged: it returns once that count is zero and no write failed
since the last wait, and raises otherwise. With ``acks=all`` (``infra.settings``) acknowledged
means in every in-sync replica. The caller orders its effects by waiting between them (state
before records, records before offsets).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer

FLUSH_STEP_S = 1.0  # one blocking flush call; the loop keeps its own deadline
DURABLE_TIMEOUT_S = 120.0  # beyond librdkafka's own message timeout (30 s): it has failed by then


class NotDurable(Exception):
    """A write was refused, or not acknowledged in time."""


class Outbox:
    """One producer; writes are sent at once and waited for together.

    ``acked`` holds, per (topic, partition) written with an explicit partition, the highest
    offset acknowledged so far (the changelog's, for the table's persisted offset).
    """

    def __init__(self, bootstrap: str, **overrides: Any) -> None:
        self._conf = reliable_producer(bootstrap, **overrides)
        self._client: Producer | None = None  # on first use: building a worker connects nowhere
        self._failures: list[KafkaError] = []
        self.acked: dict[tuple[str, int], int] = {}

    @property
    def _producer(self) -> Producer:
        if self._client is None:
            self._client = Producer(self._conf)
        return self._client

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Hand one write to the producer (``value=None``: a tombstone)."""
        callback = self._on_partitioned if partition is not None else self._on_delivery
        kwargs: dict[str, Any] = {"on_delivery": callback}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:  # librdkafka's queue is full: let it drain, then retry
                self._producer.poll(0.05)

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self._failures.append(err)

    def _on_partitioned(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._failures.append(err)
            return
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if topic is None or partition is None or offset is None:
            return
        if offset > self.acked.get((topic, partition), -1):
            self.acked[topic, partition] = offset

    def _wait(self, timeout_s: float) -> int:
        if self._client is None:
            return 0
        deadline = time.monotonic() + timeout_s
        remaining = self._producer.flush(0)
        while remaining and time.monotonic() < deadline:
            remaining = self._producer.flush(min(FLUSH_STEP_S, deadline - time.monotonic()))
        return remaining

    def _verdict(self, remaining: int) -> None:
        failures, self._failures = self._failures, []
        if failures:
            raise NotDurable(f"{len(failures)} writes refused, first: {failures[0]}")
        if remaining:
            raise NotDurable(f"{remaining} writes not acknowledged in time")

    async def durable(self, timeout_s: float = DURABLE_TIMEOUT_S) -> None:
        """Return once every write sent so far is acknowledged; raise if one failed (each
        failure is reported once). Off the event loop: the flush blocks."""
        self._verdict(await asyncio.to_thread(self._wait, timeout_s))

    def durable_now(self, timeout_s: float = DURABLE_TIMEOUT_S) -> None:
        """:meth:`durable`, blocking (at shutdown, with no event loop left to serve)."""
        self._verdict(self._wait(timeout_s))

    def serve(self) -> None:
        """Run delivery callbacks that are due, without waiting."""
        self._producer.poll(0)
