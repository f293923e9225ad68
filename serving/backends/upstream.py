"""The upstream backend: any OpenAI-compatible server (vLLM, SGLang, TGI, another ``rtrl serve``)
does the sampling; the gateway records what it answered.

Every request goes upstream with ``logprobs`` and vLLM's ``return_token_ids`` asked for, and not
streamed (the gateway streams to its own client); with the recorded sampling parameters stated
and every other one neutral, and refused when it names another
(``upstream_protocol.upstream_body``: a ``top_k`` or ``logit_bias`` would change the
distribution the rollout says it was drawn from). The log-probabilities must be those of the
distribution sampled from: vLLM must run with ``--logprobs-mode processed_logprobs`` (its
default, ``raw_logprobs``, gives the model's own softmax, before temperature and top-p); the
trainer checks it on every batch (``trainer.mismatch``). Requests go over keep-alive connections
(``infra.http_client``: the client's own CPU is paid on every completion, and that one takes a
third of aiohttp's; ``bench/RESULTS.md``, HTTP client). The answer's token ids and log-
probabilities are taken as the upstream gave them (``upstream_protocol``): when the upstream
leaves them out the completion is still served, and its rollout is refused with the reason
counted (``rollouts.build.rollout_of``), never filled in by tokenising the text.

Tools (``--upstream-tools``): passed as they are by default, so that the upstream renders them
with its model's own chat template and reads the calls with its own parser (vLLM:
``--enable-auto-tool-choice --tool-call-parser NAME``); the gateway gives each call an id of its
own (trajectories are recognised by them), counts each call that names no tool or does not
validate, and serves the calls as the upstream read them. A call the upstream's parser could
not read reaches the gateway as text, indistinguishable from text. Under ``tool_choice:
required`` or a named function the upstream decodes under a grammar of its own (vLLM's is bare
JSON, not the model's syntax), which the rollout cannot record nor the learner replay: the
answer is served and its rollout refused (``constraint_not_replayable``, counted). ``render``
sends the messages rendered in the default tool format (``models.tool_format``) instead, for a
model whose template has no tools; the gateway then reads the text as on every engine.

Checkpoints: the upstream serves its base model under ``upstream_model``; a promoted LoRA
checkpoint is written as a peft adapter directory (``adapter_config.json`` and
``adapter_model.safetensors``, the layout vLLM loads) under ``adapter_dir``, loaded with vLLM's
runtime endpoint ``POST /v1/load_lora_adapter {"lora_name", "lora_path"}`` (vLLM needs
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and ``--enable-lora``) and requested by its name as
the model. A full-weights checkpoint cannot be put into a running upstream: it is reported
(logged and counted), and serving stays where it was.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from checkpoints.adapter_export import export_adapter
from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from models.constraint import NOT_REPLAYABLE
from models.generation import Generation
from models.rollout import ModelIdentity
from serving.backends.base import BackendRequest
from serving.backends.upstream_http import UpstreamHttp
from serving.backends.upstream_protocol import (
    UpstreamTools,
    bad_gateway,
    parse_chat,
    parse_completion,
    upstream_body,
)
from serving.follower import moves_forward
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.routing import CURRENT
from serving.tool_calls import reading_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpstreamAccess:
    """How the upstream is talked to: its API key, how long an answer may take, whether a
    request's tools are passed to it as they are or rendered in the default format, and (a
    llama-server upstream, whose slots the gateway chooses) how long a request waits for a free
    slot before it is refused as ``overloaded`` (None: as long as it takes)."""

    api_key: str | None = None
    timeout_s: float = 600.0
    tools: UpstreamTools = "pass"
    slot_wait_s: float | None = None


DEFAULT_ACCESS = UpstreamAccess()


@dataclass(frozen=True)
class Route:
    checkpoint_id: str
    identity: ModelIdentity
    model: str  # the name the upstream serves it under


class UpstreamBackend:
    kind = "upstream"
    can_pass_tools = True  # an OpenAI-compatible upstream reads tools with its own template

    def __init__(self, url: str, registry: CheckpointRegistry, checkpoint_id: str,
                 upstream_model: str, adapter_dir: Path, pinned: set[str] = frozenset(),  # type: ignore[assignment]
                 access: UpstreamAccess = DEFAULT_ACCESS) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.passes_tools = access.tools == "pass" and self.can_pass_tools
        self._registry = registry
        self._upstream_model = upstream_model
        self._adapter_dir = adapter_dir
        self._headers = {"Authorization": f"Bearer {access.api_key}"} if access.api_key else {}
        self._timeout_s = access.timeout_s
        self._lock = threading.Lock()
        self.not_loaded: Counter[str] = Counter()
        self.switches = 0
        self.http = UpstreamHttp(self._headers, access.timeout_s)
        info = registry.get(checkpoint_id)
        self._current_info = info
        first = self._route_for(info)
        if first is None:
            raise ValueError(
                f"{checkpoint_id} is a full-weights checkpoint: an upstream loads "
                "adapters at runtime, not weights; start the upstream on it"
            )
        self._current: Route = first
        self._pinned: dict[str, Route] = {}
        for ckpt in pinned:
            route = self._route_for(registry.get(ckpt))
            if route is None:
                raise ValueError(
                    f"arm checkpoint {ckpt} has full weights: it cannot be loaded into the upstream"
                )
            self._pinned[ckpt] = route

    def _route_for(self, info: CheckpointInfo) -> Route | None:
        """How the upstream serves ``info`` (loading its adapter first), None for full weights
        (counted and logged: reported, not faked)."""
        kind = info.weights.kind
        if kind == "base":
            return Route(info.checkpoint_id, info.model.identity(), self._upstream_model)
        if kind == "lora":
            path = export_adapter(self._registry, info, self._adapter_dir)
            answer = httpx.post(
                f"{self.url}/v1/load_lora_adapter",
                headers=self._headers,
                json={"lora_name": info.checkpoint_id, "lora_path": str(path)},
                timeout=self._timeout_s,
            )
            if answer.status_code >= 400 and "already" not in answer.text:
                raise RuntimeError(
                    f"the upstream did not load {info.checkpoint_id}: "
                    f"{answer.status_code} {answer.text[:200]}"
                )
            return Route(info.checkpoint_id, info.model.identity(), info.checkpoint_id)
        with self._lock:
            self.not_loaded["full_weights"] += 1
        log.warning(
            "serving: %s has full weights, which an upstream cannot load at runtime; "
            "still serving %s",
            info.checkpoint_id,
            self._current_info.checkpoint_id if hasattr(self, "_current_info") else "nothing",
        )
        return None

    @property
    def current(self) -> Route:
        return self._current

    def target(self, checkpoint: str, model: str = "") -> Route:
        with self._lock:
            return self._current if checkpoint == CURRENT else self._pinned[checkpoint]

    def models(self) -> list[str]:
        with self._lock:
            return [self._current.checkpoint_id, *self._pinned]

    @property
    def current_id(self) -> str:
        return self._current.checkpoint_id

    def pin(self, info: CheckpointInfo) -> None:
        """Route an arm that names ``info`` to its adapter (loaded into the upstream); full
        weights cannot be loaded there: refused, not faked."""
        route = self._route_for(info)
        if route is None:
            raise ValueError(f"{info.checkpoint_id} has full weights: the upstream cannot serve it")
        with self._lock:
            self._pinned[info.checkpoint_id] = route

    def unpin(self, checkpoint_id: str) -> None:
        with self._lock:
            self._pinned.pop(checkpoint_id, None)

    def take_up(self, info: CheckpointInfo) -> bool:
        if not moves_forward(info, self._current_info):
            return False
        route = self._route_for(info)
        if route is None:
            return False
        with self._lock:
            before = self._current.checkpoint_id
            self._current, self._current_info = route, info
            self.switches += 1
        log.info("serving: switched the upstream from %s to %s", before, info.checkpoint_id)
        return True

    # ``on_step`` is not called: the upstream is asked for its whole answer, which the gateway
    # then streams (``stream.steps_of``).
    async def chat(self, asked: BackendRequest[Route, ChatCompletionRequest]) -> Generation:
        """``splice`` is not used: an OpenAI-compatible upstream renders its prompt from the
        messages (its rollouts' prompt ids are its own, not spliced). Tools are passed as they
        are (``passes_tools``; under ``required`` or a named function the rollout is refused:
        the upstream's constraint is not recorded) or rendered in the default tool format."""
        route, request, raw = asked.target, asked.request, asked.raw
        uses_tools = request.uses_tools()
        if uses_tools and not self.passes_tools:  # as on the other engines
            tools = ("tools", "tool_choice", "parallel_tool_calls")
            raw = {k: v for k, v in raw.items() if k not in tools}
            raw["messages"] = request.prompt_messages()
        body = upstream_body(raw, route.model, True, asked.params)
        answer = await self._ask("/v1/chat/completions", body)
        gen = parse_chat(answer, route.checkpoint_id, route.identity)
        if not (uses_tools and self.passes_tools):
            return replace(gen, tool_calls=None)  # the gateway reads the text
        reading = reading_of(request)
        constrained = reading is not None and reading.constrained
        return replace(
            gen,
            tool_calls=gen.tool_calls or (),
            unrecordable=NOT_REPLAYABLE if constrained else None,
        )

    async def complete(self, asked: BackendRequest[Route, CompletionRequest]) -> Generation:
        route = asked.target
        body = upstream_body(asked.raw, route.model, False, asked.params)
        answer = await self._ask("/v1/completions", body)
        return parse_completion(answer, route.checkpoint_id, route.identity)

    async def _ask(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = await self.http.post(self.url, path, body)
        try:
            data["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise bad_gateway("the upstream's answer is not a completion") from None
        return data

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        await self.http.close()
