"""The collector's HTTP API (FastAPI): the only way into ``telemetry.events``.

``POST /v1/events`` authenticates the key, applies the key's rate limit, reads the body within
its bound, validates each event (``batch.plan_batch``), and hands valid events to the events topic
and invalid ones to the DLQ. It answers 200, with a result per event, only after Kafka acknowledged
every record; when it cannot deliver it answers 503 with ``Retry-After`` and accepted nothing.

The server runs :class:`EventsFirst`: ``POST /v1/events`` goes straight to the handler FastAPI
documents, around FastAPI's middleware, routing and dependency layers (about a tenth of the
collector's CPU per event at batches of 100); everything else is FastAPI's. Every refusal, the
router's 404 and 405 included, has one body (``ingest.collector.errors``) with a request id.

Probes: ``/livez`` answers 200 while the process serves (a liveness probe must not restart a
collector that rightly answers 503 because Kafka is down); ``/readyz`` answers 503 while Kafka is
unreachable (take it out of the load balancer). ``/health`` is ``/readyz`` under its old name.
Metrics are not on this port: ``server`` serves them on their own (``--metrics-port``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from infra.api_keys import BEARER_SCHEME, KeyStore, bearer
from infra.topics import TopicNames
from ingest.collector.api_schema import (
    BatchAnswer,
    ErrorAnswer,
    Health,
    Live,
    error_responses,
    event_components,
    request_body_schema,
)
from ingest.collector.batch import BatchReason, BatchRefused, OutRecord, decode_body, plan_batch
from ingest.collector.config import CollectorConfig
from ingest.collector.errors import RequestIds, error_response, scope_request_id
from ingest.collector.kafka_sink import SinkUnavailable
from ingest.collector.metrics import CollectorMetrics
from ingest.collector.otlp_answer import refusal
from ingest.collector.otlp_decode import Encoding, OtlpRefused, Signal, encoding_of
from ingest.collector.otlp_intake import OtlpIntake
from ingest.collector.ratelimit import RateLimiter
from ingest.contract import now_ts

EVENTS_PATH = "/v1/events"
OTLP_PATHS = {Signal.traces: "/v1/traces", Signal.logs: "/v1/logs"}
log = logging.getLogger(__name__)


class Sink(Protocol):
    reachable: bool

    @property
    def unavailable_detail(self) -> str:
        """Why Kafka cannot take events while ``reachable`` is false, in one sentence."""

    def deliver(self, records: Sequence[OutRecord]) -> Awaitable[None]: ...

    async def serve_reports(self) -> None:
        """Runs for the server's lifetime, on its event loop."""


class EventsFirst:
    """The collector as served: ``POST /v1/events`` to ``handler``, the rest to ``api``; each
    request with its id (``errors.RequestIds``)."""

    def __init__(
        self,
        api: FastAPI,
        handler: Callable[[Request], Awaitable[Response]],
        metrics: CollectorMetrics | None = None,
    ) -> None:
        self.api = api
        self.handler = handler
        self.metrics = metrics or CollectorMetrics()
        self._serve = RequestIds(self._route)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._serve(scope, receive, send)

    async def _route(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != EVENTS_PATH or scope["method"] != "POST":
            await self.api(scope, receive, send)
            return
        try:
            response = await self.handler(Request(scope, receive))
        except Exception:  # what FastAPI's error middleware would do
            rid = scope_request_id(scope)
            log.exception("POST %s failed (request %s)", EVENTS_PATH, rid)
            response = error_response(500, "internal_error", "see the collector's log", rid)
        await response(scope, receive, send)


def create_app(
    config: CollectorConfig, keys: KeyStore, sink: Sink, clock: Callable[[], str] = now_ts
) -> EventsFirst:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        reports = asyncio.create_task(sink.serve_reports(), name="rtrl-delivery-reports")
        try:
            yield
        finally:
            reports.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reports

    app = FastAPI(
        title="rtrl collector",
        version="1",
        lifespan=lifespan,
        description="Receives telemetry events from emitters (the rtrl SDK) and "
        "writes them to Kafka. Authenticate with `Authorization: Bearer <key>`.",
    )
    topics = TopicNames(config.topic_prefix)
    limiter = RateLimiter(config.rate_per_key, config.burst_per_key)
    metrics = CollectorMetrics()

    def refuse(
        request: Request,
        status: int,
        reason: str,
        detail: str,
        retry_after_s: float | None = None,
    ) -> Response:
        headers = {}
        if retry_after_s is not None:
            headers["Retry-After"] = _seconds(retry_after_s)
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        metrics.requests.labels(str(status)).inc()
        return error_response(status, str(reason), detail, scope_request_id(request.scope), headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(
            exc.status_code,
            None,
            str(exc.detail),
            scope_request_id(request.scope),
            dict(exc.headers or {}),
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        return error_response(
            400, "bad_request", str(exc.errors())[:300], scope_request_id(request.scope)
        )

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:
        rid = scope_request_id(request.scope)
        log.error("%s %s failed (request %s)", request.method, request.url.path, rid, exc_info=exc)
        return error_response(500, "internal_error", "see the collector's log", rid)

    @app.post(
        EVENTS_PATH,
        response_model=BatchAnswer,
        summary="Send a batch of events",
        responses=error_responses(400, 401, 413, 415, 429, 503),
        openapi_extra={
            "requestBody": request_body_schema(config.max_events_per_batch),
            "security": [{"bearer": []}],
        },
    )
    async def post_events(request: Request) -> Response:
        started = time.perf_counter()
        try:
            return await _handle(request)
        finally:
            metrics.latency.observe(time.perf_counter() - started)

    def admit(request: Request, refused: Callable[..., Response]) -> str | Response:
        """The tenant of the request's key, or ``refused(status, reason, detail, retry_after_s)``
        when its key, its rate or Kafka's state says no: the same for every route that writes."""
        found = keys.lookup(bearer(request.headers.get("authorization")))
        if found is None:
            return refused(401, BatchReason.unauthorized, "missing or unknown API key")
        key_id, tenant = found
        wait_s = limiter.check(key_id)
        if wait_s is not None:
            return refused(
                429,
                BatchReason.rate_limited,
                f"more than {config.rate_per_key:g} requests/s for this key",
                wait_s,
            )
        if not sink.reachable:
            return refused(
                503, BatchReason.unavailable, sink.unavailable_detail, config.retry_after_s
            )
        return tenant

    async def _handle(request: Request) -> Response:
        tenant = admit(request, functools.partial(refuse, request))
        if isinstance(tenant, Response):
            return tenant
        try:
            body = await _read_body(request, config.max_body_bytes)
            events = decode_body(
                body, request.headers.get("content-encoding"), config.max_body_bytes
            )
            plan = plan_batch(
                events, tenant, clock(), topics.events, topics.dlq, config.max_events_per_batch
            )
        except BatchRefused as refused:
            return refuse(request, refused.status, refused.reason, refused.detail)
        try:
            await sink.deliver(plan.records)
        except SinkUnavailable as exc:
            return refuse(request, 503, BatchReason.unavailable, str(exc), config.retry_after_s)
        metrics.requests.labels("200").inc()
        metrics.events.labels("accepted").inc(plan.accepted)
        metrics.events.labels("rejected").inc(len(plan.rejections))
        for reason in plan.rejections:
            metrics.rejections.labels(reason).inc()
        return _json(
            {"accepted": plan.accepted, "rejected": len(plan.rejections), "results": plan.results}
        )

    intake = OtlpIntake(config, sink.deliver, topics.events, topics.dlq, metrics, clock)

    async def post_otlp(request: Request, signal: Signal) -> Response:
        encoding = encoding_of(request.headers.get("content-type"))

        def refused(
            status: int, reason: str, detail: str, retry_after_s: float | None = None
        ) -> Response:
            headers = {} if retry_after_s is None else {"Retry-After": _seconds(retry_after_s)}
            if status == 401:
                headers["WWW-Authenticate"] = "Bearer"
            metrics.otlp_requests.labels(str(signal), str(status)).inc()
            rid = scope_request_id(request.scope)
            return refusal(status, reason, detail, rid, encoding or Encoding.json, headers)

        tenant = admit(request, refused)
        if isinstance(tenant, Response):
            return tenant
        if encoding is None:
            media = "application/x-protobuf or application/json"
            return refused(415, "unsupported_media_type", f"OTLP/HTTP is {media}")
        try:
            body = await _read_body(request, config.max_body_bytes)
            content_encoding = request.headers.get("content-encoding")
            return await intake.export(signal, body, encoding, content_encoding, tenant)
        except (BatchRefused, OtlpRefused) as exc:
            return refused(exc.status, str(exc.reason), exc.detail)
        except SinkUnavailable as exc:
            return refused(503, BatchReason.unavailable, str(exc), config.retry_after_s)

    def otlp_route(signal: Signal) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            return await post_otlp(request, signal)

        return route

    # OTLP's own specification describes these two (docs/contracts/otlp-v1.md says what rtrl
    # reads), and their bodies are protobuf or OTLP/JSON, not this API's JSON: not in OpenAPI.
    for signal, path in OTLP_PATHS.items():
        app.post(path, include_in_schema=False)(otlp_route(signal))

    @app.get("/livez", response_model=Live, summary="Liveness: the process serves requests")
    async def livez() -> Response:
        return _json({"status": "alive"})

    async def ready(request: Request) -> Response:
        if sink.reachable:
            return _json({"status": "ready", "kafka": "reachable"})
        return error_response(
            503,
            "unavailable",
            sink.unavailable_detail,
            scope_request_id(request.scope),
            {"Retry-After": "1"},
        )

    unready: dict[int | str, dict[str, Any]] = {
        503: {"model": ErrorAnswer, "description": "Kafka unreachable"}
    }
    app.get(
        "/readyz",
        response_model=Health,
        responses=unready,
        summary="Readiness: Kafka is reachable, events are accepted",
    )(ready)
    app.get(
        "/health",
        response_model=Health,
        responses=unready,
        deprecated=True,
        summary="The same as /readyz (its former name)",
    )(ready)

    _complete_openapi(app)
    metrics.kafka_reachable.set_function(lambda: 1 if sink.reachable else 0)
    return EventsFirst(app, post_events, metrics)


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _seconds(wait_s: float) -> str:
    return str(max(1, math.ceil(wait_s)))


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
                raise BatchRefused(413, BatchReason.body_too_large, f"more than {max_bytes} bytes")
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
            components["securitySchemes"] = {"bearer": BEARER_SCHEME}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
