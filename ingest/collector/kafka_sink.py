"""The collector's way into Kafka: produce a request's records and await every acknowledgement.

An idempotent producer with ``acks=all`` (``infra.settings.reliable_producer``). Delivery reports
arrive on a dedicated poll thread and are bridged to the event loop: one future per request,
resolved when its last record is acknowledged. The collector answers 2xx only after that, so a
collector killed after answering has lost nothing. ``message.timeout.ms`` equals the request's
delivery deadline, so every record gets a definite report (delivered or failed) before it.

When no broker answers, ``reachable`` turns false (``error_cb``) and requests are refused at once
with 503 instead of queueing what cannot be delivered; the poll thread probes the cluster's
metadata until it answers again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Producer

from infra.settings import reliable_producer
from ingest.collector.batch import OutRecord

log = logging.getLogger(__name__)

POLL_S = 0.05
PROBE_EVERY_S = 1.0


class SinkUnavailable(Exception):
    """Kafka cannot take (or did not acknowledge) the records: answer 503 and let them retry."""


class _Acks:
    """Counts down the delivery reports of one request; resolves its future on the last one."""

    def __init__(self, loop: asyncio.AbstractEventLoop, expected: int) -> None:
        self.loop = loop
        self.future: asyncio.Future[str | None] = loop.create_future()
        self.remaining = expected
        self.error: str | None = None
        self.lock = threading.Lock()

    def report(self, err: KafkaError | None, _msg: object = None) -> None:
        with self.lock:
            if err is not None and self.error is None:
                self.error = err.str()
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            try:
                self.loop.call_soon_threadsafe(self._resolve)
            except RuntimeError:  # the loop is closed: the server stopped, nobody waits
                pass

    def cancel_unproduced(self, n: int) -> None:
        """``n`` records were never handed to the producer: they will not report."""
        for _ in range(n):
            self.report(None)

    def _resolve(self) -> None:
        if not self.future.done():
            self.future.set_result(self.error)


class KafkaSink:
    def __init__(self, bootstrap: str, delivery_timeout_s: float, queue_max: int) -> None:
        self._delivery_timeout_s = delivery_timeout_s
        self._producer = Producer(reliable_producer(
            bootstrap,
            **{"message.timeout.ms": int(delivery_timeout_s * 1000),
               "queue.buffering.max.messages": queue_max,
               "error_cb": self._on_error, "logger": log}))
        self.reachable = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll_loop, name="rtrl-collector-poll",
                                        daemon=True)
        self._thread.start()

    async def deliver(self, records: Sequence[OutRecord]) -> None:
        """Return once Kafka acknowledged every record; raise SinkUnavailable otherwise."""
        if not records:
            return
        if not self.reachable:
            raise SinkUnavailable("Kafka is unreachable")
        acks = _Acks(asyncio.get_running_loop(), len(records))
        for i, record in enumerate(records):
            try:
                self._producer.produce(record.topic, record.value, record.key,
                                       on_delivery=acks.report)
            except (BufferError, KafkaException) as exc:
                acks.cancel_unproduced(len(records) - i)
                reason = "producer queue full" if isinstance(exc, BufferError) else str(exc)
                raise SinkUnavailable(reason) from None
        try:
            # A little longer than message.timeout.ms: each record reports before this expires.
            error = await asyncio.wait_for(acks.future, self._delivery_timeout_s + 5.0)
        except TimeoutError:
            raise SinkUnavailable("Kafka did not acknowledge in time") from None
        if error is not None:
            raise SinkUnavailable(f"Kafka refused a record: {error}")
        self.reachable = True

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.reachable = False
        log.warning("kafka: %s", err.str())

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(POLL_S)
            if not self.reachable:
                self._probe()

    def _probe(self) -> None:
        try:
            self._producer.list_topics(timeout=PROBE_EVERY_S)
        except KafkaException:
            return
        log.info("kafka: reachable again")
        self.reachable = True

    def close(self, timeout_s: float = 10.0) -> int:
        """Stop polling, flush, and release the producer's threads and connections.

        Returns how many records were still undelivered; they are purged (their requests were
        never answered 2xx, so their emitters retry them).
        """
        self._stop.set()
        self._thread.join(timeout_s)
        left = self._producer.flush(timeout_s)
        if left:
            self._producer.purge()
            self._producer.poll(0)
        self._producer.close()
        return left
