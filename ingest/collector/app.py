"""The collector's HTTP API (FastAPI): the only way into ``telemetry.events``.

``POST /v1/events`` authenticates the key, applies the key's rate limit, reads the body within
its bound, validates each event (``batch.plan_batch``), and hands valid events to the events topic
and invalid ones to the DLQ. It answers 200, with a result per event, only after Kafka acknowledged
every record; when it cannot deliver it answers 503 with ``Retry-After`` and accepted nothing.

The server runs :class:`EventsFirst`: ``POST /v1/events`` goes straight to the handler FastAPI
documents, around FastAPI's middleware, routing and dependency layers (about a tenth of the
collector's CPU per event at batches of 100); everything else is FastAPI's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import orjson
from fastapi import FastAPI, Request, Response
from starlette.requests import ClientDisconnect

from infra.topics import TopicNames
from ingest.collector.api_schema import (
    BatchAnswer,
    Health,
    error_responses,
    event_components,
    request_body_schema,
)
from ingest.collector.batch import BatchReason, BatchRefused, OutRecord, decode_body, plan_batch
from ingest.collector.config import CollectorConfig
from ingest.collector.kafka_sink import SinkUnavailable
from ingest.collector.keys import KeyStore
from ingest.collector.metrics import CONTENT_TYPE_LATEST, CollectorMetrics
from ingest.collector.ratelimit import RateLimiter
from ingest.contract import now_ts

EVENTS_PATH = "/v1/events"
log = logging.getLogger(__name__)


class Sink(Protocol):
    reachable: bool

    def deliver(self, records: Sequence[OutRecord]) -> Awaitable[None]: ...

    async def serve_reports(self) -> None:
        """Runs for the server's lifetime, on its event loop."""


class EventsFirst:
    """The collector as served: ``POST /v1/events`` to ``handler``, the rest to ``api``."""

    def __init__(self, api: FastAPI, handler: Callable[[Request], Awaitable[Response]]) -> None:
        self.api = api
        self.handler = handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != EVENTS_PATH or scope["method"] != "POST":
            await self.api(scope, receive, send)
            return
        try:
            response = await self.handler(Request(scope, receive))
        except Exception:  # what FastAPI's error middleware would do
            log.exception("POST %s failed", EVENTS_PATH)
            response = _json({"reason": "internal_error", "detail": "see the collector's log"},
                             500)
        await response(scope, receive, send)


def create_app(config: CollectorConfig, keys: KeyStore, sink: Sink,
               clock: Callable[[], str] = now_ts) -> EventsFirst:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        reports = asyncio.create_task(sink.serve_reports(), name="rtrl-delivery-reports")
        try:
            yield
        finally:
            reports.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reports

    app = FastAPI(title="rtrl collector", version="1", lifespan=lifespan,
                  description="Receives telemetry events from emitters (the rtrl SDK) and "
                  "writes them to Kafka. Authenticate with `Authorization: Bearer <key>`.")
    topics = TopicNames(config.topic_prefix)
    limiter = RateLimiter(config.rate_per_key, config.burst_per_key)
    metrics = CollectorMetrics()

    def refuse(status: int, reason: BatchReason, detail: str,
               retry_after_s: float | None = None) -> Response:
        headers = {}
        if retry_after_s is not None:
            headers["Retry-After"] = str(max(1, math.ceil(retry_after_s)))
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        metrics.requests.labels(str(status)).inc()
        return _json({"reason": str(reason), "detail": detail}, status, headers)

    @app.post(EVENTS_PATH, response_model=BatchAnswer, summary="Send a batch of events",
              responses=error_responses(400, 401, 413, 415, 429, 503),
              openapi_extra={"requestBody": request_body_schema(config.max_events_per_batch),
                             "security": [{"bearer": []}]})
    async def post_events(request: Request) -> Response:
        started = time.perf_counter()
        try:
            return await _handle(request)
        finally:
            metrics.latency.observe(time.perf_counter() - started)

    async def _handle(request: Request) -> Response:
        found = keys.lookup(_bearer(request.headers.get("authorization")))
        if found is None:
            return refuse(401, BatchReason.unauthorized, "missing or unknown API key")
        key_id, tenant = found
        wait_s = limiter.check(key_id)
        if wait_s is not None:
            return refuse(429, BatchReason.rate_limited,
                          f"more than {config.rate_per_key:g} requests/s for this key", wait_s)
        if not sink.reachable:
            return refuse(503, BatchReason.unavailable, "Kafka is unreachable",
                          config.retry_after_s)
        try:
            body = await _read_body(request, config.max_body_bytes)
            events = decode_body(body, request.headers.get("content-encoding"),
                                 config.max_body_bytes)
            plan = plan_batch(events, tenant, clock(), topics.events, topics.dlq,
                              config.max_events_per_batch)
        except BatchRefused as refused:
            return refuse(refused.status, refused.reason, refused.detail)
        try:
            await sink.deliver(plan.records)
        except SinkUnavailable as exc:
            return refuse(503, BatchReason.unavailable, str(exc), config.retry_after_s)
        metrics.requests.labels("200").inc()
        metrics.events.labels("accepted").inc(plan.accepted)
        metrics.events.labels("rejected").inc(len(plan.rejections))
        for reason in plan.rejections:
            metrics.rejections.labels(reason).inc()
        return _json({"accepted": plan.accepted, "rejected": len(plan.rejections),
                      "results": plan.results})

    @app.get("/health", response_model=Health, summary="Liveness and Kafka reachability",
             responses={503: {"model": Health, "description": "Kafka unreachable"}})
    async def health() -> Response:
        up = sink.reachable
        return _json({"status": "ok" if up else "degraded",
                      "kafka": "reachable" if up else "unreachable"}, 200 if up else 503)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response,
             responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}})
    async def prometheus_metrics() -> Response:
        metrics.kafka_reachable.set(1 if sink.reachable else 0)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    _complete_openapi(app)
    return EventsFirst(app, post_events)


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _bearer(header: str | None) -> str:
    if not header:
        return ""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BatchRefused(413, BatchReason.body_too_large, f"more than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise BatchRefused(413, BatchReason.body_too_large,
                                   f"more than {max_bytes} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise BatchRefused(400, BatchReason.bad_batch, "the body ended early") from None
    return b"".join(chunks)


def _complete_openapi(app: FastAPI) -> None:
    """Add what FastAPI cannot infer: the event schemas of the hand-declared request body, and
    the bearer scheme."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = build()
            components = schema.setdefault("components", {})
            components.setdefault("schemas", {}).update(event_components())
            components["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "an API key from `rtrl keys create --org ORG`"}}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
