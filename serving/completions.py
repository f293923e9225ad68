"""A completion request from admission to answer, whoever received it (``api``'s FastAPI
routes or ``fast_path``).

Each request goes: interaction id (``X-Rtrl-Interaction-Id``, or a new UUIDv7) → arm (the
experiment's sticky assignment by ``X-Rtrl-User-Id``) → the checkpoint that will serve it, bound
now → the backend → the rollout (never for ``X-Rtrl-Privacy-Mode: true``; refused with a counted
reason when the answer lacks ids or log-probabilities) → the answer, whole or as server-sent
events, with the interaction id, checkpoint and experiment in ``X-Rtrl-*`` headers for the
editor plugin to stamp on its telemetry. Recording never fails a completion (``recorder``), nor
delays it: a whole answer's rollout is put aside once the answer is sent, and what was put aside
is built and handed to the recorder ``RECORD_AFTER_S`` later, all at once. A backend answers a
batch of requests together, and the gateway's one event loop then writes those answers one
after the other: a rollout built between two of them would delay every answer behind it
(``bench/RESULTS.md``, gateway). The rollout's ``created_at`` is when it was built.

A stream (``stream: true``) starts once the backend has given its first token (a local backend
gives each as it is drawn) or its whole answer (an upstream), so that a request the backend
refuses is still answered with its error status; its rollout is recorded when the completion
is whole, whether or not the client stayed to read it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from pydantic import ValidationError
from starlette.responses import Response, StreamingResponse

from checkpoints.record import CheckpointInfo
from ingest.contract import now_ts, uuid7
from models.rollout import Experiment
from models.sampling import SamplingParams
from serving.assignment import Assignment
from serving.generation import (
    Generation,
    Shown,
    chat_response,
    completion_response,
    rollout_of,
)
from serving.metrics import GatewayMetrics
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.recorder import RolloutRecorder
from serving.stream import (
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
from serving.upstream import UpstreamError

RECORD_AFTER_S = 0.005  # how long finished completions wait to be recorded, together
PARAMS_KEPT = 4096  # sets of sampling parameters kept validated
STOPS_KEPT_CHARS = 256  # a set whose stop strings are longer in all is validated every time

log = logging.getLogger(__name__)
INTERACTION = "x-rtrl-interaction-id"
CHECKPOINT = "X-Rtrl-Checkpoint-Id"
EXPERIMENT = "X-Rtrl-Experiment"
USER = "x-rtrl-user-id"
PRIVACY = "x-rtrl-privacy-mode"

OnStep = Callable[[Step], None]
Request = ChatCompletionRequest | CompletionRequest


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


class JsonAnswer(Response):
    """A JSON response with its headers laid out once, here: Starlette's ``Response`` works out
    the media type, charset and length anew on every answer."""

    media_type = "application/json"

    def __init__(self, body: bytes, status: int = 200,
                 headers: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.status_code, self.body, self.background = status, body, None
        self.raw_headers = [
            (b"content-length", b"%d" % len(body)),
            (b"content-type", b"application/json"),
            *(
                (k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in (headers or {}).items()
            ),
        ]


def error_response(status: int, message: str, kind: str, code: str | None = None) -> Response:
    """An error in OpenAI's shape."""
    body = {"error": {"message": message, "type": kind, "code": code, "param": None}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JsonAnswer(orjson.dumps(body), status, headers)


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """The first of pydantic's validation errors as a 400, named by its place in the body.

    >>> invalid_request([{"loc": ("body", "max_tokens"), "msg": "too big"}]).message
    'max_tokens: too big'
    """
    first = errors[0] if errors else {"loc": (), "msg": "invalid"}
    where = ".".join(str(p) for p in first["loc"] if p != "body")
    return ApiError(400, f"{where}: {first['msg']}", "invalid_request_error")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


class _After:
    """A response's background, which Starlette awaits once the answer is sent: ``call(gen)``
    on the event loop (Starlette's ``BackgroundTask`` would send a sync call to a thread pool,
    and inspects what it is given on every request)."""

    def __init__(self, call: Callable[[Generation], None], gen: Generation) -> None:
        self._call, self._gen = call, gen

    async def __call__(self) -> None:
        self._call(self._gen)


class Completions:
    """``recorder`` None: nothing is recorded (the backend stands as another gateway's
    upstream, which records)."""

    def __init__(self, backend: Backend, recorder: RolloutRecorder | None,
                 assignment: Assignment, config: GatewayConfig,
                 metrics: GatewayMetrics) -> None:  # fmt: skip
        self.backend, self.recorder, self.assignment = backend, recorder, assignment
        self.config, self.metrics = config, metrics
        self._pending: set[asyncio.Task[Generation]] = set()  # streams' generations
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}  # bound once, then reused
        self._params: dict[tuple[Any, ...], SamplingParams] = {}
        self._put_aside: list[tuple[Generation, str, bool, SamplingParams, Experiment | None]] = []
        self._recording: asyncio.TimerHandle | None = None

    async def serve(self, headers: Mapping[str, str], endpoint: str, req: Request) -> Response:
        """The answer to ``req`` (``headers``: the request's, looked up in lower case); an
        :class:`ApiError` for a request refused before the backend answers."""
        started = time.perf_counter()
        status = 500
        try:
            interaction, private, experiment, target = self._admit(headers, req.model)
            params = self._sampling(req)
            raw = req.model_dump(exclude_unset=True)
            answer = {INTERACTION: interaction, CHECKPOINT: target.checkpoint_id}
            if experiment is not None:
                answer[EXPERIMENT] = f"{experiment.name}:{experiment.arm}"

            def done(gen: Generation) -> None:
                if self.recorder is None:
                    return
                self._put_aside.append((gen, interaction, private, params, experiment))
                if self._recording is None:
                    loop = asyncio.get_running_loop()
                    self._recording = loop.call_later(RECORD_AFTER_S, self.record_put_aside)

            try:
                if req.stream:
                    response = await self._stream(req, target, raw, params, answer, done)
                else:
                    gen = await self._generate(req, target, raw, params)
                    response = self._whole(req, gen, answer)
                    response.background = _After(done, gen)  # type: ignore[assignment]
            except UpstreamError as exc:
                status = exc.status
                return JsonAnswer(exc.body, exc.status)
            status = response.status_code
            return response
        except ApiError as exc:
            status = exc.status
            raise
        finally:
            self._child(self.metrics.latency, endpoint).observe(time.perf_counter() - started)
            self._child(self.metrics.requests, endpoint, str(status)).inc()

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once (``labels`` takes a lock and checks its
        arguments on every call)."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _admit(
        self, headers: Mapping[str, str], model: str
    ) -> tuple[str, bool, Experiment | None, Any]:
        """Interaction id, privacy, experiment arm and the bound checkpoint of a request."""
        interaction = headers.get(INTERACTION) or uuid7()
        if not 1 <= len(interaction) <= 128:
            raise ApiError(
                400, "X-Rtrl-Interaction-Id: 1 to 128 characters", "invalid_request_error"
            )
        experiment, target = self.assignment.admit(headers.get(USER) or interaction, model)
        return interaction, _truthy(headers.get(PRIVACY)), experiment, target

    def _sampling(self, req: Request) -> SamplingParams:
        """The request's sampling parameters, validated once for each set seen (most requests
        ask for the same few)."""
        key = temperature, top_p, budget, stops = (
            req.temperature,
            req.top_p,
            req.token_budget(),
            req.stops(),
        )
        params = self._params.get(key)
        if params is not None:
            return params
        try:
            params = SamplingParams(
                temperature=temperature or 1.0,
                top_p=top_p or 1.0,
                max_tokens=budget or self.config.default_max_tokens,
                stop=stops,
            )
        except ValidationError as exc:
            raise ApiError(400, str(exc.errors()[0]["msg"]), "invalid_request_error") from None
        if len(self._params) < PARAMS_KEPT and sum(map(len, stops)) <= STOPS_KEPT_CHARS:
            self._params[key] = params  # bounded: unusual stop strings are not kept
        return params

    def record_put_aside(self) -> None:
        """Record every completion put aside so far (the app calls it once more on shutdown)."""
        if self._recording is not None:
            self._recording.cancel()
            self._recording = None
        put_aside, self._put_aside = self._put_aside, []
        if put_aside:
            created_at = now_ts()
            for completion in put_aside:
                try:
                    self._record(*completion, created_at)
                except Exception:  # one rollout's failure must not lose the others
                    self._child(self.metrics.rollouts, "failed").inc()
                    log.exception("the rollout of %s could not be recorded", completion[1])

    def _record(self, gen: Generation, interaction: str, private: bool,
                params: SamplingParams, experiment: Experiment | None,
                created_at: str) -> None:  # fmt: skip
        if self.recorder is None:
            return
        outcomes = self.metrics.rollouts
        if private:
            self._child(outcomes, "private").inc()
            return
        rollout = rollout_of(gen, interaction, params, experiment, created_at)
        if isinstance(rollout, str):
            self._child(outcomes, "refused").inc()
            self._child(self.metrics.refused, rollout).inc()
            log.info("rollout of %s refused: %s", interaction, rollout)
            return
        self._child(outcomes, "recorded" if self.recorder.record(rollout) else "dropped").inc()

    async def _generate(self, req: Request, target: Any, raw: dict[str, Any],
                        params: SamplingParams,
                        on_step: OnStep | None = None) -> Generation:  # fmt: skip
        try:
            if isinstance(req, ChatCompletionRequest):
                return await self.backend.chat(target, req, raw, params, on_step)
            return await self.backend.complete(target, req, raw, params, on_step)
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_request_error") from None

    def _shown(self, req: Request) -> Shown:
        chat = isinstance(req, ChatCompletionRequest)
        wants_logprobs = req.logprobs if chat else req.logprobs is not None
        return Shown(bool(wants_logprobs) and not self.config.hide_logprobs, req.return_token_ids)

    def _whole(self, req: Request, gen: Generation, headers: dict[str, str]) -> Response:
        chat = isinstance(req, ChatCompletionRequest)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{secrets.token_hex(16)}"
        render = chat_response if chat else completion_response
        body = render(gen, rid, int(time.time()), gen.checkpoint_id, self._shown(req))
        return JsonAnswer(orjson.dumps(body), 200, headers)

    async def _stream(self, req: Request, target: Any, raw: dict[str, Any],
                      params: SamplingParams, headers: dict[str, str],
                      done: Callable[[Generation], None]) -> Response:  # fmt: skip
        """Server-sent events that follow the generation's steps as they come; the backend's
        refusal before its first step is raised here, as for a whole answer."""
        steps: asyncio.Queue[Step | None] = asyncio.Queue()  # None: the generation has ended
        task = asyncio.ensure_future(self._generate(req, target, raw, params, steps.put_nowait))
        self._pending.add(task)

        def ended(t: asyncio.Task[Generation]) -> None:
            self._pending.discard(t)
            steps.put_nowait(None)
            if not t.cancelled() and t.exception() is None:
                done(t.result())

        task.add_done_callback(ended)
        first = await steps.get()
        whole_steps = steps_of(task.result()) if first is None else None  # raises its error
        chat = isinstance(req, ChatCompletionRequest)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{secrets.token_hex(16)}"
        created, model, show = int(time.time()), target.checkpoint_id, self._shown(req)

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
