"""The gateway's routes: OpenAI's completions, chat completions and models, vLLM's adapter
endpoint, probes.

Each completion request goes: API key (the collector's key store, ``Authorization: Bearer``) →
interaction id (``X-Rtrl-Interaction-Id``, or a new UUIDv7) → arm (the experiment's sticky
assignment by ``X-Rtrl-User-Id``) → the checkpoint that will serve it, bound now → the backend →
the rollout (never for ``X-Rtrl-Privacy-Mode: true``; refused with a counted reason when the
answer lacks ids or log-probabilities) → the answer, whole or as server-sent events, with the
interaction id, checkpoint and experiment in ``X-Rtrl-*`` headers for the editor plugin to stamp
on its telemetry. Recording never fails a completion (``recorder``), nor delays it: a whole
answer's rollout is handed to the producer once the answer is sent.

A stream (``stream: true``) starts once the backend has given its first token (a local backend
gives each as it is drawn) or its whole answer (an upstream), so that a request the backend
refuses is still answered with its error status; its rollout is recorded when the completion
is whole, whether or not the client stayed to read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from ingest.collector.keys import KeyStore
from ingest.contract import now_ts, uuid7
from trainer.gateway.assignment import Assignment
from trainer.gateway.generation import (
    Generation,
    Shown,
    chat_response,
    completion_response,
    rollout_of,
)
from trainer.gateway.metrics import GatewayMetrics
from trainer.gateway.protocol import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionRequest,
    CompletionResponse,
    ErrorResponse,
    LoadLoraAdapterRequest,
    ModelCard,
    ModelList,
)
from trainer.gateway.recorder import RolloutRecorder
from trainer.gateway.stream import (
    DONE,
    Step,
    chat_head,
    chat_step,
    chat_tail,
    completion_step,
    completion_tail,
    rest_of,
    sse,
    steps_of,
)
from trainer.gateway.upstream import UpstreamError
from trainer.registry import CheckpointInfo
from trainer.rollout import Experiment
from trainer.sampling import SamplingParams

log = logging.getLogger(__name__)
INTERACTION = "X-Rtrl-Interaction-Id"
CHECKPOINT = "X-Rtrl-Checkpoint-Id"
EXPERIMENT = "X-Rtrl-Experiment"
USER = "X-Rtrl-User-Id"
PRIVACY = "X-Rtrl-Privacy-Mode"


OnStep = Callable[[Step], None]


class Backend(Protocol):
    """``target`` binds a request to a loaded checkpoint (an object with its ``checkpoint_id``);
    ``chat``/``complete`` may pass each token to ``on_step`` as it is drawn (or never)."""

    kind: str
    switches: int

    def target(self, checkpoint: str, model: str = "") -> Any: ...
    def models(self) -> list[str]: ...
    def take_up(self, info: CheckpointInfo) -> bool: ...
    def pin(self, info: CheckpointInfo) -> None: ...
    def unpin(self, checkpoint_id: str) -> None: ...
    @property
    def current_id(self) -> str: ...
    async def chat(
        self,
        target: Any,
        request: ChatCompletionRequest,
        raw: dict[str, Any],
        params: SamplingParams,
        on_step: OnStep | None = None,
    ) -> Generation: ...
    async def complete(
        self,
        target: Any,
        request: CompletionRequest,
        raw: dict[str, Any],
        params: SamplingParams,
        on_step: OnStep | None = None,
    ) -> Generation: ...
    def ready(self) -> bool: ...
    async def close(self) -> None: ...


@dataclass(frozen=True)
class GatewayConfig:
    default_max_tokens: int = 256
    hide_logprobs: bool = False  # never show log-probabilities to callers


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code


def _error(status: int, message: str, kind: str, code: str | None = None,
           headers: dict[str, str] | None = None) -> Response:  # fmt: skip
    body = {"error": {"message": message, "type": kind, "code": code, "param": None}}
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _bearer(header: str | None) -> str:
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


async def _now(call: Callable[..., None], *args: Any) -> None:
    """``call(*args)`` on the event loop (a sync background task would go to a thread pool)."""
    call(*args)


def create_app(backend: Backend, recorder: RolloutRecorder | None, keys: KeyStore,
               assignment: Assignment | None = None, config: GatewayConfig = GatewayConfig(),
               metrics: GatewayMetrics | None = None) -> FastAPI:  # fmt: skip
    """``recorder`` None: nothing is recorded (the backend stands as another gateway's
    upstream, which records). ``assignment`` None: no experiment, ever."""
    metrics = metrics or GatewayMetrics()
    assignment = assignment or Assignment(backend)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await backend.close()

    app = FastAPI(
        title="rtrl serve",
        version="1",
        lifespan=lifespan,
        description="OpenAI-compatible completions that record every answer as a "
        "rollout on Kafka. Authenticate with `Authorization: Bearer <key>` (keys from "
        "`rtrl keys create`).",
    )
    app.state.metrics = metrics

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, exc.message, exc.kind, exc.code, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        return _error(400, f"{where}: {first['msg']}", "invalid_request_error")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        return _error(exc.status_code, str(exc.detail), "invalid_request_error")

    async def tenant(request: Request) -> str:
        # async: a sync dependency would cost every request a hop to FastAPI's thread pool;
        # the key store answers from its cache (SQLite on a miss, a local file), as the
        # collector does on its event loop.
        found = keys.lookup(_bearer(request.headers.get("authorization")))
        if found is None:
            raise ApiError(
                401, "missing or unknown API key", "authentication_error", "invalid_api_key"
            )
        return found[1]

    def admit(request: Request, model: str) -> tuple[str, bool, Experiment | None, Any]:
        """Interaction id, privacy, experiment arm and the bound checkpoint of a request."""
        interaction = request.headers.get(INTERACTION) or uuid7()
        if not 1 <= len(interaction) <= 128:
            raise ApiError(400, f"{INTERACTION}: 1 to 128 characters", "invalid_request_error")
        experiment, target = assignment.admit(request.headers.get(USER) or interaction, model)
        return interaction, _truthy(request.headers.get(PRIVACY)), experiment, target

    def sampling(req: ChatCompletionRequest | CompletionRequest) -> SamplingParams:
        try:
            return SamplingParams(
                temperature=req.temperature or 1.0,
                top_p=req.top_p or 1.0,
                max_tokens=req.token_budget() or config.default_max_tokens,
                stop=req.stops(),
            )
        except ValidationError as exc:
            raise ApiError(400, str(exc.errors()[0]["msg"]), "invalid_request_error") from None

    def record(
        gen: Generation,
        interaction: str,
        private: bool,
        params: SamplingParams,
        experiment: Experiment | None,
    ) -> None:
        if recorder is None:
            return
        if private:
            metrics.rollouts.labels("private").inc()
            return
        rollout = rollout_of(gen, interaction, params, experiment, now_ts())
        if isinstance(rollout, str):
            metrics.rollouts.labels("refused").inc()
            metrics.refused.labels(rollout).inc()
            log.info("rollout of %s refused: %s", interaction, rollout)
            return
        metrics.rollouts.labels("recorded" if recorder.record(rollout) else "dropped").inc()

    async def generate(req: ChatCompletionRequest | CompletionRequest, target: Any,
                       raw: dict[str, Any], params: SamplingParams,
                       on_step: OnStep | None = None) -> Generation:  # fmt: skip
        try:
            if isinstance(req, ChatCompletionRequest):
                return await backend.chat(target, req, raw, params, on_step)
            return await backend.complete(target, req, raw, params, on_step)
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_request_error") from None

    async def serve(
        request: Request, endpoint: str, req: ChatCompletionRequest | CompletionRequest
    ) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            interaction, private, experiment, target = admit(request, req.model)
            params = sampling(req)
            raw = req.model_dump(exclude_unset=True)
            headers = {INTERACTION: interaction, CHECKPOINT: target.checkpoint_id}
            if experiment is not None:
                headers[EXPERIMENT] = f"{experiment.name}:{experiment.arm}"

            def done(gen: Generation) -> None:
                record(gen, interaction, private, params, experiment)

            try:
                if req.stream:
                    response = await stream(req, target, raw, params, headers, done)
                else:
                    gen = await generate(req, target, raw, params)
                    response = whole(req, gen, headers)
                    response.background = BackgroundTask(_now, done, gen)  # once it is sent
            except UpstreamError as exc:
                status = exc.status
                return Response(exc.body, exc.status, media_type="application/json")
            status = response.status_code
            return response
        except ApiError as exc:
            status = exc.status
            raise
        finally:
            metrics.requests.labels(endpoint, str(status)).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    def shown(req: ChatCompletionRequest | CompletionRequest) -> Shown:
        chat = isinstance(req, ChatCompletionRequest)
        wants_logprobs = req.logprobs if chat else req.logprobs is not None  # type: ignore[union-attr]
        return Shown(bool(wants_logprobs) and not config.hide_logprobs, req.return_token_ids)

    def whole(req: ChatCompletionRequest | CompletionRequest, gen: Generation,
              headers: dict[str, str]) -> Response:  # fmt: skip
        chat = isinstance(req, ChatCompletionRequest)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        render = chat_response if chat else completion_response
        body = render(gen, rid, int(time.time()), gen.checkpoint_id, shown(req))
        return Response(
            body.model_dump_json(exclude_none=True), 200, headers, media_type="application/json"
        )

    pending: set[asyncio.Task[Generation]] = set()  # streams' generations, until recorded

    async def stream(req: ChatCompletionRequest | CompletionRequest, target: Any,
                     raw: dict[str, Any], params: SamplingParams, headers: dict[str, str],
                     done: Callable[[Generation], None]) -> Response:  # fmt: skip
        """Server-sent events that follow the generation's steps as they come; the backend's
        refusal before its first step is raised here, as for a whole answer."""
        steps: asyncio.Queue[Step | None] = asyncio.Queue()  # None: the generation has ended
        task = asyncio.ensure_future(generate(req, target, raw, params, steps.put_nowait))
        pending.add(task)

        def ended(t: asyncio.Task[Generation]) -> None:
            pending.discard(t)
            steps.put_nowait(None)
            if not t.cancelled() and t.exception() is None:
                done(t.result())

        task.add_done_callback(ended)
        first = await steps.get()
        whole_steps = steps_of(task.result()) if first is None else None  # raises its error
        chat = isinstance(req, ChatCompletionRequest)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created, model, show = int(time.time()), target.checkpoint_id, shown(req)

        async def each_step() -> AsyncIterator[Step]:
            if whole_steps is not None:  # a backend that does not stream: its answer, cut up
                for cut in whole_steps:
                    yield cut
                return
            step: Step | None = first
            while step is not None:
                yield step
                step = await steps.get()

        async def events() -> AsyncIterator[bytes]:
            sent, offset, head = [], 0, True
            async for step in each_step():
                if chat and head:
                    yield sse(chat_head(rid, created, model, show, step.prompt_ids))
                head = False
                if chat:
                    yield sse(chat_step(step, rid, created, model, show))
                else:
                    yield sse(completion_step(step, offset, rid, created, model, show))
                sent.append(step.text)
                offset += len(step.text)
            gen = await task
            rest = rest_of(gen.text, "".join(sent))
            if chat:
                if head:
                    yield sse(chat_head(rid, created, model, show, gen.prompt_ids))
                for chunk in chat_tail(gen, rest, rid, created, model):
                    yield sse(chunk)
            else:
                yield sse(completion_tail(gen, rest, rid, created, model))
            yield DONE

        return StreamingResponse(
            events(),
            media_type="text/event-stream",  # type: ignore[arg-type]
            headers=headers,
        )

    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 401, 502)
    }

    @app.post(
        "/v1/chat/completions",
        response_model=ChatCompletionResponse,
        responses=errors,
        summary="A chat completion, recorded as a rollout",
        openapi_extra={"security": [{"bearer": []}]},
    )
    async def chat_completions(req: ChatCompletionRequest, request: Request,
                               _: str = Depends(tenant)) -> Response:  # fmt: skip
        return await serve(request, "chat", req)

    @app.post(
        "/v1/completions",
        response_model=CompletionResponse,
        responses=errors,
        summary="A text completion, recorded as a rollout",
        openapi_extra={"security": [{"bearer": []}]},
    )
    async def completions(req: CompletionRequest, request: Request,
                          _: str = Depends(tenant)) -> Response:  # fmt: skip
        return await serve(request, "completions", req)

    @app.get("/v1/models", response_model=ModelList, summary="The checkpoints served")
    async def models(_: str = Depends(tenant)) -> ModelList:
        now = int(time.time())
        return ModelList(data=[ModelCard(id=m, created=now) for m in backend.models()])

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
            return _error(503, "no checkpoint is ready", "unavailable")
        body = {
            "status": "ready",
            "backend": backend.kind,
            "models": backend.models(),
            "spooled_rollouts": recorder.spooled() if recorder is not None else 0,
        }
        return Response(orjson.dumps(body), 200, media_type="application/json")

    _bearer_scheme(app)
    return app


def _bearer_scheme(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API key from `rtrl keys create --org ORG`",
                }
            }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
