"""The collector's way into Kafka: produce a request's records and await every acknowledgement.

An idempotent producer with ``acks=all`` (``infra.settings.reliable_producer``). Delivery reports
are served on the event loop's own thread (:meth:`KafkaSink.serve_reports`, run for the server's
lifetime): one future per request, resolved when its last record is acknowledged. Serving them on
a separate thread made the two threads fight for the GIL on every report, which cost about a
third of the collector's CPU. The collector answers 2xx only after that, so a collector killed
after answering has lost nothing. ``message.timeout.ms`` equals the request's delivery deadline,
so every record gets a definite report (delivered or failed) before it.

When no broker answers, ``reachable`` turns false (``error_cb``) and requests are refused at once
with 503 instead of queueing what cannot be delivered; a small thread probes the cluster's
metadata (a blocking call) until it answers again. When Kafka refuses the collector's identity
(its credentials, or the ACL an idempotent producer needs), the producer is done for good:
``reachable`` stays false and every 503 says so in one sentence (``infra.kafka_errors``), so
the operator can fix the credential or the ACL and restart it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from infra.kafka_errors import is_refusal, refusal_sentence
from infra.settings import process_security, reliable_producer
from ingest.collector.batch import OutRecord

log = logging.getLogger(__name__)

BUSY_POLL_S = 0.001
"""Delivery reports are served this often while a request waits for them."""
IDLE_POLL_S = 0.05
"""And this often otherwise (errors, late reports of requests that gave up)."""
PROBE_EVERY_S = 1.0


class SinkUnavailable(Exception):
    """Kafka cannot take (or did not acknowledge) the records: answer 503 and let them retry."""


class _Acks:
    """Counts down the delivery reports of one request; resolves its future on the last one.

    Reports arrive on the loop's thread (``poll`` is called there), or on the closing thread
    from ``flush`` once the loop is gone, when nobody waits any more.
    """

    __slots__ = ("future", "remaining", "error", "refused")

    def __init__(self, loop: asyncio.AbstractEventLoop, expected: int) -> None:
        self.future: asyncio.Future[str | None] = loop.create_future()
        self.remaining = expected
        self.error: str | None = None
        self.refused: str | None = None
        """The sentence of an ACL or credential refusal, when one was the first error."""

    def report(self, err: KafkaError | None, msg: Any = None) -> None:
        if err is not None and self.error is None:
            self.error = err.str()
            if is_refusal(err.code()):
                topic = msg.topic() if msg is not None else "?"
                self.refused = refusal_sentence(err.code(), process_security(), "write", topic)
        self.remaining -= 1
        if self.remaining == 0 and not self.future.done():
            try:
                self.future.set_result(self.error)
            except RuntimeError:  # the loop is closed: the server stopped, nobody waits
                pass

    def cancel_unproduced(self, n: int) -> None:
        """``n`` records were never handed to the producer: they will not report."""
        self.remaining -= n - 1
        self.report(None)


class KafkaSink:
    def __init__(self, bootstrap: str, delivery_timeout_s: float, queue_max: int) -> None:
        self._delivery_timeout_s = delivery_timeout_s
        self._producer = Producer(
            reliable_producer(
                bootstrap,
                **{
                    "message.timeout.ms": int(delivery_timeout_s * 1000),
                    "queue.buffering.max.messages": queue_max,
                    "error_cb": self._on_error,
                    "logger": log,
                },
            )
        )
        self.reachable = True
        self._refused: str | None = None  # Kafka refused this identity: no recovery
        self._waiting = 0  # requests awaiting their reports
        self._wake = asyncio.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._probe_loop, name="rtrl-collector-probe", daemon=True
        )
        self._thread.start()

    @property
    def unavailable_detail(self) -> str:
        return self._refused or "Kafka is unreachable"

    async def serve_reports(self) -> None:
        """Serve delivery reports and errors, on this loop's thread, until cancelled."""
        while True:
            try:
                self._producer.poll(0)
            except KafkaException as exc:  # a fatal error, raised once more by every poll
                self._refuse(exc.args[0])
            if self._waiting:
                await asyncio.sleep(BUSY_POLL_S)
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_S)
            except TimeoutError:
                pass

    async def deliver(self, records: Sequence[OutRecord]) -> None:
        """Return once Kafka acknowledged every record; raise SinkUnavailable otherwise."""
        if not records:
            return
        if not self.reachable:
            raise SinkUnavailable(self.unavailable_detail)
        acks = _Acks(asyncio.get_running_loop(), len(records))
        for i, record in enumerate(records):
            try:
                self._producer.produce(
                    record.topic, record.value, record.key, on_delivery=acks.report
                )
            except (BufferError, KafkaException) as exc:
                acks.cancel_unproduced(len(records) - i)
                reason = "producer queue full" if isinstance(exc, BufferError) else str(exc)
                raise SinkUnavailable(reason) from None
        self._waiting += 1
        self._wake.set()
        try:
            # A little longer than message.timeout.ms: each record reports before this expires.
            error = await asyncio.wait_for(acks.future, self._delivery_timeout_s + 5.0)
        except TimeoutError:
            raise SinkUnavailable("Kafka did not acknowledge in time") from None
        finally:
            self._waiting -= 1
        if acks.refused is not None:
            log.error("%s", acks.refused)
            raise SinkUnavailable(acks.refused)
        if error is not None:
            raise SinkUnavailable(f"Kafka refused a record: {error}")
        self.reachable = True

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.reachable = False
        if is_refusal(err.code()) or err.fatal():
            self._refuse(err)
            return
        log.warning("kafka: %s", err.str())

    def _refuse(self, err: KafkaError) -> None:
        """The producer cannot go on (refused credentials, a missing ACL, a fatal error)."""
        self.reachable = False
        if self._refused is None:
            self._refused = (
                refusal_sentence(err.code(), process_security(), "produce to", "the cluster")
                if is_refusal(err.code())
                else f"Kafka: {err.str()}"
            )
            log.error("%s", self._refused)

    def _probe_loop(self) -> None:
        while not self._stop.wait(IDLE_POLL_S):
            if not self.reachable and self._refused is None:
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
