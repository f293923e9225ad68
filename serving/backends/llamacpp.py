"""llama.cpp's ``llama-server`` as the gateway's upstream: exact prompt and completion ids, and
behaviour log-probabilities of the distribution the learner scores.

How each completion is asked (the chat template, the tokenizer, then ``/completion`` on the
prompt's ids, streamed when it has stop strings) and why: ``llamacpp.native``. A completion
whose log-probabilities llama.cpp does not give for every sampled id (an unpatched server never
sends a token ending inside a multi-byte character on its own; our build,
``llamacpp/patches``, does) is served, and its rollout refused as ``missing_logprobs`` or
``missing_token_ids``: never filled in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from llamacpp.native import (
    LlamaCppError,
    completion_body,
    held_back,
    is_llama_cpp,
    joined_stream,
    parse_native,
    token_ids,
    with_text,
)
from models.constraint import Constraint
from models.generation import Generation
from models.sampling import SamplingParams
from serving.answers import RETRY_AFTER_S, ApiError
from serving.backends.base import BackendRequest
from serving.backends.upstream import (
    DEFAULT_ACCESS,
    Route,
    UpstreamAccess,
    UpstreamBackend,
    bad_gateway,
)
from serving.backends.upstream_http import UpstreamHttp
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.slot_ledger import SlotLedger, SlotsBusy, cache_key
from serving.splice import Splice, check_length, continuation_of

log = logging.getLogger(__name__)
LLAMA_CPP = "llama.cpp"
OPENAI = "openai"
KINDS = ("auto", OPENAI, LLAMA_CPP)
_TEMPLATE_FIELDS = ("messages", "chat_template_kwargs")
RouteT = TypeVar("RouteT", bound=Route)


def detect_kind(url: str, api_key: str | None = None) -> str:
    """``llama.cpp`` when the upstream answers ``GET /props`` as llama-server does, else
    ``openai`` (vLLM, SGLang, another gateway)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.get(f"{url.rstrip('/')}/props", headers=headers, timeout=30)
        return LLAMA_CPP if answer.status_code == 200 and is_llama_cpp(answer.json()) else OPENAI
    except (httpx.HTTPError, ValueError):
        return OPENAI


def backend_class(url: str, kind: str, api_key: str | None = None) -> type[UpstreamBackend]:
    """The upstream backend for ``kind`` (``auto``: asked of the upstream itself)."""
    if kind not in KINDS:
        raise ValueError(f"upstream kind {kind!r}: one of {', '.join(KINDS)}")
    if kind == "auto":
        kind = detect_kind(url, api_key)
    return LlamaCppBackend if kind == LLAMA_CPP else UpstreamBackend


def request_seed(raw: dict[str, Any]) -> int | None:
    """The request's ``seed`` as llama-server takes it (a uint32 whose largest value means
    "random"), so that a seeded request draws the same answer again; None: the server draws.

    >>> request_seed({"seed": 7}), request_seed({"seed": -1}), request_seed({})
    (7, 4294967294, None)
    """
    seed = raw.get("seed")
    return seed % _SEEDS if type(seed) is int else None


_SEEDS = 2**32 - 1  # llama.cpp's seeds: 0 .. 2**32 - 2; 2**32 - 1 asks for a random one


# --- the native protocol -------------------------------------------------------------------
class LlamaCppNative(Generic[RouteT]):
    """How a completion is asked of the llama-server that serves its route: the chat template,
    the tokenizer, then ``/completion`` on the prompt's ids. ``url_of``: the server of a route;
    ``adapter_of``: what a ``/completion`` request adds to choose the route's adapter. Held by
    the llama-server upstream (one server) and by the ``--engine llama.cpp`` backend (a server
    for each checkpoint)."""

    def __init__(self, http: UpstreamHttp, headers: dict[str, str],
                 url_of: Callable[[RouteT], str],
                 adapter_of: Callable[[RouteT], dict[str, Any]],
                 slot_wait_s: float | None = None) -> None:  # fmt: skip
        self._http, self._headers = http, headers
        self._url_of, self._adapter_of = url_of, adapter_of
        self._slot_wait_s = slot_wait_s  # None: a request waits for a slot as long as it takes
        self._props: dict[str, dict[str, Any]] = {}
        self._ledgers: dict[str, SlotLedger] = {}

    async def chat(self, asked: BackendRequest[RouteT, ChatCompletionRequest]) -> Generation:
        route, request, params = asked.target, asked.request, asked.params
        seed, constraint = request_seed(asked.raw), asked.constraint
        if asked.splice is not None:
            prompt_ids = await self._spliced(route, asked.splice)
            return await self._generate(route, prompt_ids, params, seed, constraint, asked.tenant)
        if request.uses_tools():  # rendered in the default tool format
            template: dict[str, Any] = {"messages": request.prompt_messages()}
        else:
            template = {k: asked.raw[k] for k in _TEMPLATE_FIELDS if k in asked.raw}
        prompt = (await self._call(route, "/apply-template", template)).get("prompt")
        if not isinstance(prompt, str):
            raise bad_gateway("llama-server's /apply-template gave no prompt")
        return await self._generate(route, prompt, params, seed, constraint, asked.tenant)

    async def complete(self, asked: BackendRequest[RouteT, CompletionRequest]) -> Generation:
        raw = asked.raw
        return await self._generate(
            asked.target, raw["prompt"], asked.params, request_seed(raw), tenant=asked.tenant
        )

    async def _generate(
        self,
        route: RouteT,
        prompt: str | list[int],
        params: SamplingParams,
        seed: int | None,
        constraint: Constraint | None = None,
        tenant: str = "",
    ) -> Generation:
        """The completion of ``prompt``, decoded under ``constraint``'s GBNF grammar when given
        (only the ``--engine llama.cpp`` backend's servers, our patched build, are asked one:
        ``admission`` refuses it for any other llama-server), in a slot whose cache is
        ``tenant``'s under the route's adapter or none (``serving.slot_ledger``)."""
        if isinstance(prompt, str):
            asked = {"content": prompt, "add_special": True, "parse_special": True}
            ids = token_ids((await self._call(route, "/tokenize", asked)).get("tokens"))
            if ids is None:
                raise bad_gateway("llama-server's /tokenize gave no token ids")
        else:
            ids = tuple(prompt)
        # every prompt, fresh or spliced: llama-server would otherwise shift or cut the context
        check_length(len(ids), params.max_tokens, await self._context(route))
        grammar = None if constraint is None else constraint.grammar
        adapter = self._adapter_of(route)
        body = completion_body(list(ids), params, grammar) | adapter
        if seed is not None:
            body["seed"] = seed
        if params.stop:  # streamed: the whole answer drops the stop string's probabilities
            body["stream"] = True
        key = cache_key(tenant, adapter)
        ledger = await self._ledger(route)
        try:
            lease = await ledger.acquire(key, ids, self._slot_wait_s)
        except SlotsBusy as exc:
            log.warning("serving: a request to %s refused: %s", route.checkpoint_id, exc)
            raise overloaded(exc) from None
        held: tuple[int, ...] | None = None
        try:
            body |= {"id_slot": lease.slot, "cache_prompt": lease.warm}
            generation = await self._completion(route, ids, body)
            held = ids + (generation.token_ids or ())
        finally:
            await ledger.release(lease, key, held)
        return generation if constraint is None else replace(generation, constraint=constraint)

    async def _completion(self, route: RouteT, ids: tuple[int, ...],
                          body: dict[str, Any]) -> Generation:  # fmt: skip
        if body.get("stream"):
            streamed = await self._http.post_body(self._url_of(route), "/completion", body)
            try:
                answer = joined_stream(streamed)
            except LlamaCppError as exc:
                raise bad_gateway(str(exc)) from None
            answer = await self._held_back_text(route, answer)
        else:
            answer = await self._call(route, "/completion", body)
        return parse_native(answer, ids, route.checkpoint_id, route.identity)

    async def _held_back_text(self, route: RouteT, answer: dict[str, Any]) -> dict[str, Any]:
        """A streamed answer whose last tokens' text llama-server held back at the budget
        (``llamacpp.native.held_back``), with that text: otherwise the user is shown less than
        the rollout's ids say was sampled."""
        held = held_back(answer)
        if not held:
            return answer
        pieces = {}
        for at in held:
            asked = {"tokens": [answer["tokens"][at]]}
            piece = (await self._call(route, "/detokenize", asked)).get("content")
            if not isinstance(piece, str):
                raise bad_gateway("llama-server's /detokenize gave no text")
            pieces[at] = piece
        return with_text(answer, pieces)

    async def _spliced(self, route: RouteT, splice: Splice) -> list[int]:
        """An extending call's prompt: the earlier ids, then the continuation by the server's
        own template and tokenizer (``serving.splice``)."""
        template = {"messages": splice.template_messages()}
        rendered = (await self._call(route, "/apply-template", template)).get("prompt")
        if not isinstance(rendered, str):
            raise bad_gateway("llama-server's /apply-template gave no prompt")
        asked = {"content": continuation_of(rendered), "add_special": False, "parse_special": True}
        ids = token_ids((await self._call(route, "/tokenize", asked)).get("tokens"))
        if ids is None:
            raise bad_gateway("llama-server's /tokenize gave no token ids")
        return splice.prompt(ids)  # its length is checked with every prompt's (_generate)

    async def _server_props(self, route: RouteT) -> dict[str, Any]:
        """The route's server's ``GET /props``, asked once."""
        url = self._url_of(route)
        if url not in self._props:
            async with httpx.AsyncClient(headers=self._headers, timeout=30) as http:
                answer = await http.get(f"{url.rstrip('/')}/props")
            props = answer.json() if answer.status_code == 200 else None
            self._props[url] = props if isinstance(props, dict) else {}
        return self._props[url]

    async def _context(self, route: RouteT) -> int | None:
        """The context of one of the server's slots."""
        settings = (await self._server_props(route)).get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None

    async def _ledger(self, route: RouteT) -> SlotLedger:
        """The route's server's slots (one when its props do not say how many)."""
        url = self._url_of(route)
        if url not in self._ledgers:
            slots = (await self._server_props(route)).get("total_slots")
            self._ledgers[url] = SlotLedger(slots if isinstance(slots, int) and slots > 0 else 1)
        return self._ledgers[url]

    async def _call(self, route: RouteT, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = await self._http.post(self._url_of(route), path, body)
        if not isinstance(data, dict):
            raise bad_gateway(f"llama-server's {path} answered no JSON object")
        return data


def overloaded(busy: SlotsBusy) -> ApiError:
    """The 503 of a request no slot took within the gateway's slot wait, with a ``Retry-After``
    that OpenAI's clients honour (they retry a 503 on their own).

    >>> e = overloaded(SlotsBusy(4, 60))
    >>> e.status, e.code, e.headers
    (503, 'overloaded', {'Retry-After': '10'})
    """
    return ApiError(503, f"the server is at capacity: {busy}; try again later", "server_error",
                    "overloaded", headers={"Retry-After": str(RETRY_AFTER_S)})  # fmt: skip


# --- the backend ---------------------------------------------------------------------------
class LlamaCppBackend(UpstreamBackend):
    """An upstream that is llama-server: its native endpoints (:class:`LlamaCppNative`), so that
    every id is exact. Checkpoints: the base it was started on; a promoted LoRA or full-weights
    checkpoint is reported (counted, logged) and serving stays where it was, as for any upstream
    that cannot load it at runtime (``rtrl serve --engine llama.cpp`` starts a server for each
    checkpoint instead: ``serving.backends.llamacpp_engine``). Tools are rendered in the default
    tool format, as on every engine of ours: llama-server reads them only under ``--jinja``."""

    can_pass_tools = False

    def __init__(self, url: str, registry: CheckpointRegistry, checkpoint_id: str,
                 upstream_model: str, adapter_dir: Path, pinned: set[str] = frozenset(),  # type: ignore[assignment]
                 access: UpstreamAccess = DEFAULT_ACCESS) -> None:  # fmt: skip
        super().__init__(url, registry, checkpoint_id, upstream_model, adapter_dir, pinned, access)
        # the one server serves one checkpoint: no adapter to choose
        self._native = LlamaCppNative[Route](self.http, self._headers, self._own_url, _no_adapter,
                                             access.slot_wait_s)  # fmt: skip

    def _own_url(self, route: Route) -> str:
        return self.url

    def _route_for(self, info: CheckpointInfo) -> Route | None:
        if info.weights.kind == "base":
            return super()._route_for(info)
        with self._lock:
            self.not_loaded[f"{info.weights.kind}_weights"] += 1
        log.warning(
            "serving: %s has %s weights, which a running llama-server cannot load: serve with "
            "--engine llama.cpp to follow such checkpoints",
            info.checkpoint_id,
            info.weights.kind,
        )
        return None

    async def chat(self, asked: BackendRequest[Route, ChatCompletionRequest]) -> Generation:
        return await self._native.chat(asked)

    async def complete(self, asked: BackendRequest[Route, CompletionRequest]) -> Generation:
        return await self._native.complete(asked)


def _no_adapter(route: Route) -> dict[str, Any]:
    return {}
