"""One OTLP export, from an authenticated request's body to Kafka and OTLP's answer.

The same path and the same guarantees as ``POST /v1/events``: the body is read within the same
bounds (gzip included), each span or log record becomes an event checked by the contract or a
dead-letter record with its reason (``otlp_map``), and the answer is sent only once Kafka has
acknowledged every one of them; when it cannot, ``SinkUnavailable`` reaches the route, which
answers 503 with ``Retry-After`` and nothing was accepted (OTLP exporters retry a 503). The
authentication, the rate limit and the reading of the body are the route's (``app``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.responses import Response

from ingest.collector.batch import OutRecord
from ingest.collector.config import CollectorConfig
from ingest.collector.metrics import CollectorMetrics
from ingest.collector.otlp_answer import export_answer
from ingest.collector.otlp_decode import Encoding, Signal, decode, inflate
from ingest.collector.otlp_map import keep, plan_export

Deliver = Callable[[Sequence[OutRecord]], Awaitable[None]]


class OtlpIntake:
    def __init__(
        self,
        config: CollectorConfig,
        deliver: Deliver,
        events_topic: str,
        dlq_topic: str,
        metrics: CollectorMetrics,
        clock: Callable[[], str],
    ) -> None:
        self._config = config
        self._deliver = deliver
        self._events_topic = events_topic
        self._dlq_topic = dlq_topic
        self._metrics = metrics
        self._clock = clock

    async def export(
        self,
        signal: Signal,
        body: bytes,
        encoding: Encoding,
        content_encoding: str | None,
        tenant: str,
    ) -> Response:
        """OTLP's answer once every record is acknowledged; raises ``OtlpRefused`` for a body
        refused as a whole and ``SinkUnavailable`` when Kafka did not take it."""
        limit = self._config.max_body_bytes
        items = decode(
            signal,
            inflate(body, content_encoding, limit),
            encoding,
            self._config.max_events_per_batch,
            keep,
        )
        plan = plan_export(items, tenant, self._clock(), self._events_topic, self._dlq_topic)
        await self._deliver(plan.records)
        metrics, name = self._metrics, str(signal)
        metrics.otlp_requests.labels(name, "200").inc()
        metrics.otlp_items.labels(name, "accepted").inc(plan.accepted)
        metrics.otlp_items.labels(name, "rejected").inc(len(plan.rejections))
        metrics.otlp_items.labels(name, "ignored").inc(len(plan.ignored))
        for reason in plan.rejections:
            metrics.otlp_rejections.labels(name, reason).inc()
        for reason in plan.ignored:
            metrics.otlp_ignored.labels(name, reason).inc()
        return export_answer(signal, len(plan.rejections), plan.error_message, encoding)
