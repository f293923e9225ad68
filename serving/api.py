"""The gateway's routes: OpenAI's completions, chat completions and models, vLLM's adapter
endpoint, probes, and the OpenAPI document that describes them.

The completion routes' work is ``completions.Completions``; ``fast_path`` answers them ahead of
FastAPI's routing unless ``create_app(fast_path=False)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from infra.api_keys import BEARER_SCHEME, KeyStore
from serving.answers import ApiError, error_response, invalid_request
from serving.assignment import Assignment
from serving.backends.base import Backend
from serving.completions import Completions, GatewayConfig
from serving.fast_path import MAX_BODY_BYTES, CompletionsFastPath, tenant_of
from serving.metrics import GatewayMetrics
from serving.protocol import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionRequest,
    CompletionResponse,
    ErrorResponse,
    LoadLoraAdapterRequest,
    ModelCard,
    ModelList,
)
from serving.rollouts.recorder import RolloutRecorder


def create_app(backend: Backend, recorder: RolloutRecorder | None, keys: KeyStore,
               assignment: Assignment | None = None, config: GatewayConfig | None = None,
               metrics: GatewayMetrics | None = None,
               fast_path: bool = True) -> FastAPI | CompletionsFastPath:  # fmt: skip
    """The FastAPI app, behind the completions' fast path unless ``fast_path`` is False.
    ``recorder`` None: nothing is recorded (the backend stands as another gateway's upstream,
    which records). ``assignment`` None: no experiment, ever."""
    metrics = metrics or GatewayMetrics()
    completions = Completions(
        backend, recorder, assignment or Assignment(backend), config or GatewayConfig(), metrics
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if recorder is not None:
                recorder.hand_over()  # what was put aside is built now, not lost
            await backend.close()

    app = FastAPI(
        title="rtrl serve",
        version="1",
        lifespan=lifespan,
        max_body_size=MAX_BODY_BYTES,
        telemetry={"tracing": False, "metrics": False, "logs": False},  # Prometheus has it
        description="OpenAI-compatible completions that record every answer as a "
        "rollout on Kafka. Authenticate with `Authorization: Bearer <key>` (keys from "
        "`rtrl keys create`).",
    )
    app.state.metrics = metrics

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> Response:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        return invalid_request(exc.errors()).response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        return error_response(exc.status_code, str(exc.detail), "invalid_request_error")

    async def tenant(request: Request) -> str:
        # async: a sync dependency would cost every request a hop to FastAPI's thread pool;
        # the key store answers from its cache (SQLite on a miss, a local file), as the
        # collector does on its event loop.
        return tenant_of(keys, request.headers.get("authorization"))

    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 401, 404, 413, 502)
    }

    @app.post(
        "/v1/chat/completions",
        response_model=ChatCompletionResponse,
        responses=errors,
        summary="A chat completion, recorded as a rollout",
        openapi_extra={"security": [{"bearer": []}]},
    )
    async def chat_completions(req: ChatCompletionRequest, request: Request,
                               org_id: str = Depends(tenant)) -> Response:  # fmt: skip
        return await completions.serve(request.headers, "chat", req, org_id)

    @app.post(
        "/v1/completions",
        response_model=CompletionResponse,
        responses=errors,
        summary="A text completion, recorded as a rollout",
        openapi_extra={"security": [{"bearer": []}]},
    )
    async def text_completions(req: CompletionRequest, request: Request,
                               org_id: str = Depends(tenant)) -> Response:  # fmt: skip
        return await completions.serve(request.headers, "completions", req, org_id)

    @app.get(
        "/v1/models",
        response_model=ModelList,
        summary="The names a request may give as its model: the checkpoints served, then the "
        "names of the followed checkpoint",
    )
    async def models(org_id: str = Depends(tenant)) -> ModelList:
        now = int(time.time())
        return ModelList(data=[ModelCard(id=m, created=now) for m in completions.models(org_id)])

    @app.post(
        "/v1/load_lora_adapter",
        response_class=PlainTextResponse,
        summary="vLLM's runtime adapter endpoint (local backend): serve a peft adapter "
        "directory under a model name",
    )
    async def load_lora_adapter(body: LoadLoraAdapterRequest,
                                _: str = Depends(tenant)) -> Response:  # fmt: skip
        load = getattr(backend, "load_adapter", None)
        if load is None:
            raise ApiError(
                400, "an upstream backend loads adapters into its upstream", "invalid_request_error"
            )
        try:
            await asyncio.to_thread(load, body.lora_name, Path(body.lora_path))
        except (OSError, ValueError) as exc:
            raise ApiError(
                400, f"adapter {body.lora_name}: {exc}", "invalid_request_error"
            ) from None
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' added successfully.")

    @app.get("/livez", summary="Liveness: the process serves requests")
    async def livez() -> dict[str, str]:
        return {"status": "alive"}

    @app.get(
        "/readyz",
        summary="Readiness: a checkpoint is loaded (Kafka is not needed to "
        "serve: rollouts wait in the spool)",
    )
    async def readyz() -> Response:
        if not backend.ready():
            return error_response(503, "no checkpoint is ready", "unavailable")
        body = {
            "status": "ready",
            "backend": backend.kind,
            "models": backend.models(),
            "spooled_rollouts": recorder.pending() if recorder is not None else 0,
            # answers served whose rollout was refused, by reason: `rtrl run` counts them per
            # round from here (its gateway serves no metrics port)
            "refused_rollouts": metrics.refused_by_reason(),
        }
        return Response(orjson.dumps(body), 200, media_type="application/json")

    _bearer_scheme(app)
    return CompletionsFastPath(app, completions, keys) if fast_path else app


def _bearer_scheme(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {"bearer": BEARER_SCHEME}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
