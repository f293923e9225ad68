"""A completion request from admission to answer, whoever received it (``api``'s FastAPI
routes or ``fast_path``).

Each request goes: admission (``admission``: interaction id, from the recognised run or
``X-Rtrl-Interaction-Id`` or a new UUIDv7; the response id that carries it; the arm, the
experiment's sticky assignment by ``X-Rtrl-User-Id``; the checkpoint that will serve it, bound
now) → the backend → the rollout (never for ``X-Rtrl-Privacy-Mode: true``; refused with a counted
reason when the answer lacks ids or log-probabilities) → the answer, whole or as server-sent
events, with the interaction id, checkpoint and experiment in ``X-Rtrl-*`` headers for the
editor plugin to stamp on its telemetry. Recording never fails a completion, nor delays it: a
whole answer's rollout is put aside with the recorder once the answer is sent, and built on the
recorder's thread (``rollouts.recorder``: the one layer that batches rollouts).

A request may name as its ``model`` any name of ``/v1/models`` (the checkpoints served, and the
names the gateway serves the followed checkpoint under, ``GatewayConfig.model_names``), or none;
any other name is a 404 ``model_not_found``, as OpenAI answers it. The name does not choose the
checkpoint (the arm does), except an adapter's loaded by ``/v1/load_lora_adapter``.

A stream (``stream: true``) starts once the backend has given its first token (a local backend
gives each as it is drawn) or its whole answer (an upstream), so that a request the backend
refuses is still answered with its error status; its rollout is recorded when the completion
is whole, whether or not the client stayed to read it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import orjson
from starlette.responses import Response, StreamingResponse

from infra.tenancy import scoped_key
from models.generation import Generation
from models.rollout import Experiment, Rollout, TurnRef
from models.sampling import SamplingParams
from models.tool_format import Parsed
from serving.admission import INTERACTION, USER, Admission, Admitted, Request
from serving.answers import After, ApiError, JsonAnswer
from serving.assignment import Assignment, assignment_unit
from serving.backends.base import Backend, BackendRequest, is_chat
from serving.backends.upstream_protocol import UpstreamError
from serving.deadline import answered_within, first_step_within
from serving.generation import Shown, chat_response, completion_response
from serving.metrics import GatewayMetrics
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.rollouts.build import rollout_of
from serving.rollouts.recorder import RolloutRecorder
from serving.splice import SpliceError
from serving.stream import (
    DONE,
    Step,
    chat_delta,
    chat_head,
    chat_step,
    chat_tail,
    completion_step,
    completion_tail,
    rest_of,
    sse,
    steps_of,
    usage_chunk,
)
from serving.tool_calls import (
    Reading,
    ShownText,
    broken_count,
    outcome,
    read,
    reading_of,
    stream_tail,
    tool_calls_of,
    upstream_outcomes,
)
from serving.tool_calls import with_calls as answer_with_calls
from serving.trajectory import AnswerMemory
from serving.turns import Turn, Turns

log = logging.getLogger(__name__)
CHECKPOINT = "X-Rtrl-Checkpoint-Id"
EXPERIMENT = "X-Rtrl-Experiment"


@dataclass(frozen=True)
class GatewayConfig:
    default_max_tokens: int = 256
    hide_logprobs: bool = False  # never show log-probabilities to callers
    model_names: tuple[str, ...] = ("default",)  # names of the followed checkpoint, too
    remember_answers: int = 50_000  # answers kept for agents' next calls (0: none)
    remember_s: float = 3600.0  # how long after its last use an answer is kept
    answer_deadline_s: float = 0.0  # refused past it, 504 (serving.deadline; 0: none)


@dataclass(frozen=True, slots=True)
class Answered:
    """The backend's whole answer, and its tool calls as read once (None: not a chat with
    tools)."""

    gen: Generation
    parsed: Parsed | None


@dataclass(frozen=True, slots=True)
class CompletionJob:
    """An admitted completion on its way to its answer: what the backend is asked, what it was
    admitted as (interaction, response id, privacy, arm), the ``X-Rtrl-*`` headers of its
    answer, and for a chat how its answer is read for tool calls (``reading``), its place in
    its agent run (``turn``), whom it is assigned as (``scope``, scoped by the organisation)
    and the organisation its API key belongs to (``org_id``, stamped on its rollout)."""

    asked: BackendRequest[Any, Request]
    admitted: Admitted
    headers: dict[str, str]
    reading: Reading | None = None
    turn: Turn | None = None
    scope: str = ""
    org_id: str | None = None


class Completions:
    """``recorder`` None: nothing is recorded (the backend stands as another gateway's
    upstream, which records)."""

    def __init__(self, backend: Backend[Any], recorder: RolloutRecorder | None,
                 assignment: Assignment, config: GatewayConfig,
                 metrics: GatewayMetrics) -> None:  # fmt: skip
        self.backend, self.recorder, self.assignment = backend, recorder, assignment
        self.config, self.metrics = config, metrics
        self._deadline_s = config.answer_deadline_s
        self.admission = Admission(backend, assignment, config.model_names,
                                   config.default_max_tokens)  # fmt: skip
        self._pending: set[asyncio.Task[Answered]] = set()  # streams' answers
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}  # bound once, then reused
        self.turns = None
        if config.remember_answers > 0:
            memory = AnswerMemory(config.remember_answers, config.remember_s)
            self.turns = Turns(memory, metrics.calls)

    def _counted(self, outcome: str) -> None:
        """What became of a rollout, counted (the recorder tells it, from its thread)."""
        self._child(self.metrics.rollouts, outcome).inc()

    async def serve(self, headers: Mapping[str, str], endpoint: str, req: Request,
                    org_id: str | None = None) -> Response:  # fmt: skip
        """The answer to ``req`` (``headers``: the request's, looked up in lower case; ``org_id``:
        the organisation of its API key, never of its body); an :class:`ApiError` for a request
        refused before the backend answers."""
        started = time.perf_counter()
        status = 500
        try:
            job = self._admit(headers, req, org_id)
            try:
                if req.stream:
                    response = await self._stream(job)
                else:
                    answered = await answered_within(self._answer(job), self._deadline_s)
                    response = self._whole(job, answered)
                    response.background = After(partial(self._record, job), answered)  # type: ignore[assignment]
            except UpstreamError as exc:
                status = exc.status
                return JsonAnswer(exc.body, exc.status)
            status = response.status_code
            return response
        except ApiError as exc:
            status = exc.status
            self._child(self.metrics.requests_refused, exc.code or exc.kind).inc()
            raise
        finally:
            self._child(self.metrics.latency, endpoint).observe(time.perf_counter() - started)
            self._child(self.metrics.requests, endpoint, str(status)).inc()

    def _admit(self, headers: Mapping[str, str], req: Request,
               org_id: str | None = None) -> CompletionJob:  # fmt: skip
        """What ``req`` is admitted as (``admission``), and, for a chat, how its answer is read
        for tool calls and where it stands in its agent run; refused with an :class:`ApiError`."""
        params = self.admission.sampling(req)
        chat = isinstance(req, ChatCompletionRequest)
        reading = reading_of(req) if isinstance(req, ChatCompletionRequest) else None
        constraint = None
        if isinstance(req, ChatCompletionRequest):
            constraint = self.admission.constraint(req, reading)
        # scoped: two organisations' same user id is two people, in the arms and the run memory
        unit = assignment_unit(headers.get(USER), req.user, headers.get("authorization"))
        scope = scoped_key(org_id, unit)
        recognition = None
        if isinstance(req, ChatCompletionRequest) and self.turns is not None:  # before the arm
            recognition = self.turns.recognise(req, scope, headers.get(INTERACTION), org_id or "")
        known = recognition.interaction_id if recognition is not None else None
        admitted = self.admission.admit(headers, chat, req.model, known, scope, org_id)
        turn = None
        if recognition is not None and self.turns is not None:
            turn = self.turns.turn(admitted.response_id, admitted.interaction, recognition,
                                   admitted.target, org_id or "")  # fmt: skip
        answer = {INTERACTION: admitted.interaction, CHECKPOINT: admitted.target.checkpoint_id}
        if admitted.experiment is not None:
            answer[EXPERIMENT] = f"{admitted.experiment.name}:{admitted.experiment.arm}"
        splice = turn.splice if turn is not None else None
        raw = req.model_dump(exclude_unset=True)
        asked = BackendRequest(admitted.target, req, raw, params, None, splice, constraint,
                               org_id or "")  # fmt: skip
        return CompletionJob(asked, admitted, answer, reading, turn, scope, org_id)

    def _record(self, job: CompletionJob, answered: Answered) -> None:
        """Put the whole answer's rollout aside with the recorder (built on its thread)."""
        if self.recorder is None:
            return
        admitted = job.admitted
        if admitted.private:
            self._counted("private")
            return
        gen, turn, params = answered.gen, job.turn, job.asked.params
        broken = broken_count(gen, job.reading, answered.parsed)
        ref = turn.ref(gen, broken) if turn else None
        self.recorder.later(
            lambda created_at: self._rollout(gen, admitted.interaction, params,
                                             admitted.experiment, created_at, ref, job.org_id),
            self._counted,
        )  # fmt: skip

    def models(self, org_id: str | None = None) -> list[str]:
        """The names a request of ``org_id`` may give as its model, as ``/v1/models`` lists
        them."""
        return self.admission.models(org_id)

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once (``labels`` takes a lock and checks its
        arguments on every call)."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _rollout(self, gen: Generation, interaction: str, params: SamplingParams,
                 experiment: Experiment | None, created_at: str,
                 turn: TurnRef | None = None,
                 org_id: str | None = None) -> Rollout | None:  # fmt: skip
        """The completion's rollout, built on the recorder's thread; None when the answer
        lacks what a rollout needs (the reason counted and logged)."""
        rollout = rollout_of(gen, interaction, params, experiment, created_at, turn, org_id)
        if isinstance(rollout, str):
            self._counted("refused")
            self._child(self.metrics.refused, rollout).inc()
            log.info("rollout of %s refused: %s", interaction, rollout)
            return None
        return rollout

    async def _answer(self, job: CompletionJob) -> Answered:
        """The backend's whole answer, and for a chat with tools its calls, read once here for
        everything that needs them (the answer shown, the run's memory, the rollout)."""
        gen = await self._generate(job.asked)
        return Answered(gen, read(gen, job.reading) if job.reading is not None else None)

    async def _generate(self, asked: BackendRequest[Any, Request]) -> Generation:
        try:
            if is_chat(asked):
                return await self.backend.chat(asked)
            return await self.backend.complete(cast(BackendRequest[Any, CompletionRequest], asked))
        except SpliceError as exc:
            code = exc.reason if exc.reason == "context_length_exceeded" else "splice_failed"
            raise ApiError(400, str(exc), "invalid_request_error", code, "messages") from None
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_request_error") from None

    def _shown(self, req: Request) -> Shown:
        if isinstance(req, ChatCompletionRequest):
            wants, top = req.logprobs, req.top_logprobs or 0
        else:
            wants, top = req.logprobs is not None, req.logprobs or 0
        shown = wants and not self.config.hide_logprobs
        return Shown(shown, req.return_token_ids, top if shown else 0)

    def _whole(self, job: CompletionJob, answered: Answered) -> Response:
        req, reading, gen, parsed = job.asked.request, job.reading, answered.gen, answered.parsed
        render = chat_response if isinstance(req, ChatCompletionRequest) else completion_response
        rid = job.admitted.response_id
        body = render(gen, rid, int(time.time()), gen.checkpoint_id, self._shown(req))
        calls = []
        if reading is not None and parsed is not None:
            self._count_calls(gen, reading, parsed)
            calls = tool_calls_of(parsed)
            body = answer_with_calls(body, parsed, calls)
        self._remember(job, gen, parsed, calls)
        return JsonAnswer(orjson.dumps(body), 200, job.headers)

    def _remember(self, job: CompletionJob, gen: Generation, parsed: Parsed | None,
                  calls: list[dict[str, Any]]) -> None:  # fmt: skip
        """The answer kept for the agent run's next call (a chat with its turn only)."""
        req, turn = job.asked.request, job.turn
        if turn is not None and self.turns is not None and isinstance(req, ChatCompletionRequest):
            self.turns.remember(turn, req, job.scope, gen, parsed, calls, job.org_id or "")

    def _count_calls(self, gen: Generation, reading: Reading, parsed: Parsed) -> None:
        """The outcome of the answer's calls (or of each upstream call) counted, and logged
        when they are served as text or as the upstream read them."""
        counted = [outcome(parsed)] if gen.tool_calls is None else upstream_outcomes(gen, reading)
        for each in counted:
            self._child(self.metrics.tool_calls, each).inc()
        if parsed.broken is not None:
            log.info("tool calls of %s refused (%s): served as text", gen.checkpoint_id,
                     parsed.broken)  # fmt: skip
        elif gen.tool_calls and set(counted) != {"called"}:
            log.info("tool calls of %s as the upstream read them (%s): served as it gave them",
                     gen.checkpoint_id, ", ".join(counted))  # fmt: skip

    async def _stream(self, job: CompletionJob) -> Response:
        """Server-sent events that follow the generation's steps as they come; the backend's
        refusal before its first step is raised here, as for a whole answer."""
        steps: asyncio.Queue[Step | None] = asyncio.Queue()  # None: the generation has ended
        streamed = replace(job, asked=replace(job.asked, on_step=steps.put_nowait))
        task = asyncio.ensure_future(self._answer(streamed))
        self._pending.add(task)

        def ended(t: asyncio.Task[Answered]) -> None:
            self._pending.discard(t)
            steps.put_nowait(None)
            if not t.cancelled() and t.exception() is None:
                self._record(job, t.result())

        task.add_done_callback(ended)
        first = await first_step_within(steps, task, self._deadline_s)
        whole_steps = steps_of(task.result().gen) if first is None else None  # raises its error

        async def each_step() -> AsyncIterator[Step]:
            if whole_steps is not None:  # a backend that does not stream: its answer, cut up
                for cut in whole_steps:
                    yield cut
                return
            step: Step | None = first
            while step is not None:
                yield step
                step = await steps.get()

        return StreamingResponse(
            self._events(job, task, each_step(), int(time.time())),
            media_type="text/event-stream",  # type: ignore[arg-type]
            headers=job.headers,
        )

    async def _events(
        self,
        job: CompletionJob,
        task: asyncio.Task[Answered],
        each_step: AsyncIterator[Step],
        created: int,
    ) -> AsyncIterator[bytes]:
        """The stream's chunks: one for each step, then the answer's tail (its tool calls, its
        finish reason, its usage)."""
        req, reading, rid = job.asked.request, job.reading, job.admitted.response_id
        chat = isinstance(req, ChatCompletionRequest)
        model, show = job.asked.target.checkpoint_id, self._shown(req)
        with_usage = req.stream_options is not None and req.stream_options.include_usage
        null_usage = with_usage and chat  # chat's chunks say "usage": null; completions' have none
        shown_text = ShownText() if reading is not None else None
        sent, offset, head = [], 0, True
        async for step in each_step:
            if chat and head:
                yield sse(chat_head(rid, created, model, show, step.prompt_ids), null_usage)
            head = False
            if shown_text is not None:  # nothing of a call is shown as text
                step = replace(step, text=shown_text.push(step.text))
                if not step.text and not (show.logprobs or show.token_ids):
                    continue
            if chat:
                yield sse(chat_step(step, rid, created, model, show), null_usage)
            else:
                chunk = completion_step(step, offset, rid, created, model, show)
                yield sse(chunk, null_usage)
            sent.append(step.text)
            offset += len(step.text)
        answered = await task
        gen, parsed = answered.gen, answered.parsed
        rest = rest_of(gen.text, "".join(sent))
        if shown_text is not None and reading is not None and parsed is not None:
            if head:
                yield sse(chat_head(rid, created, model, show, gen.prompt_ids), null_usage)
            self._count_calls(gen, reading, parsed)
            calls = tool_calls_of(parsed)
            self._remember(job, gen, parsed, calls)
            for delta in stream_tail(parsed, shown_text.sent, calls):
                yield sse(chat_delta(rid, created, model, delta), null_usage)
            finish = "tool_calls" if parsed.calls else gen.finish_reason
            yield sse(chat_delta(rid, created, model, {}, finish), null_usage)
        elif chat:
            self._remember(job, gen, None, [])
            if head:
                yield sse(chat_head(rid, created, model, show, gen.prompt_ids), null_usage)
            for chunk in chat_tail(gen, rest, rid, created, model):
                yield sse(chunk, null_usage)
        else:
            yield sse(completion_tail(gen, rest, rid, created, model, with_usage))
        if with_usage:
            yield sse(usage_chunk(gen, rid, created, model, chat))
        yield DONE
