"""The local backend: the trainer's policy interface, on this machine's CPU or GPU.

It holds the followed checkpoint and the ones an experiment pins, loaded from the registry
(every file checked against its sha256), and samples through the :class:`Batcher`. A request is
bound to one loaded checkpoint when it is admitted (:meth:`LocalBackend.target`), so a switch
while it waits or runs never changes what serves it. A newly promoted checkpoint is loaded on
the follower's thread, beside the one serving, and swapped in only once whole.

A streamed request is sent token by token as its batch draws them: the policy's per-token
callback runs on the batcher's thread, and each token crosses to the event loop
(``loop.call_soon_threadsafe``), where :class:`~serving.stream.Increments` decides the
text it shows and the request's stream sends it. Streaming only observes the sampling: the
completion, and so the rollout, is the one the same request would get without a stream.

It also answers vLLM's ``/v1/load_lora_adapter``: a peft adapter directory loaded over the
followed checkpoint's base and served under its name, so that one ``rtrl serve`` can stand as the
upstream of another exactly as vLLM would.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from models.generation import Alternatives, Generation
from models.loading import load_base
from models.policy import CausalLMPolicy, Completion, TopTokens
from models.rollout import ModelIdentity
from models.tool_template import defines_tools
from serving.backends.base import BackendRequest
from serving.backends.batcher import Batcher, JobToken
from serving.follower import moves_forward
from serving.generation import text_pieces
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.routing import CURRENT
from serving.splice import Splice, check_length, continuation_of
from serving.stream import Increments, Step

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    """A loaded checkpoint: what one request is served by, start to end."""

    checkpoint_id: str
    identity: ModelIdentity
    policy: CausalLMPolicy


def _served(registry: CheckpointRegistry, info: CheckpointInfo,
            device: str) -> Served:  # fmt: skip
    policy = load_policy(registry, info).to(device)
    policy.model.eval()
    log.info(
        "serving: loaded %s (%s weights over base %s) on %s",
        info.checkpoint_id,
        info.weights.kind,
        info.model.base_sha256[:12],
        device,
    )
    return Served(info.checkpoint_id, info.model.identity(), policy)


class LocalBackend:
    kind = "local"
    constrains_tool_calls = True  # required and named functions under a grammar (models.constraint)

    def __init__(self, registry: CheckpointRegistry, checkpoint_id: str,
                 pinned: set[str] = frozenset(), device: str = "cpu", seed: int = 0,  # type: ignore[assignment]
                 max_batch: int = 16, max_wait_s: float = 0.0) -> None:  # fmt: skip
        self._registry = registry
        self._device = device
        self._lock = threading.Lock()
        info = registry.get(checkpoint_id)
        self._current_info = info
        self._current = _served(registry, info, device)
        self._pinned = {c: _served(registry, registry.get(c), device) for c in pinned}
        self._adapters: dict[str, Served] = {}
        self.batcher = Batcher(seed, max_batch, max_wait_s)
        self.switches = 0

    # --- which checkpoint --------------------------------------------------------------------
    @property
    def current(self) -> Served:
        return self._current

    def target(self, checkpoint: str, model: str = "") -> Served:
        """What serves a request: the arm's checkpoint (``current``: the followed one), or an
        adapter loaded by ``/v1/load_lora_adapter`` when the request names it as its model."""
        with self._lock:
            if model in self._adapters:
                return self._adapters[model]
            if checkpoint == CURRENT:
                return self._current
            return self._pinned[checkpoint]

    def models(self) -> list[str]:
        with self._lock:
            return [self._current.checkpoint_id, *self._pinned, *self._adapters]

    def take_up(self, info: CheckpointInfo) -> bool:
        """Serve ``info`` from now on if it moves serving forward; True when it switched."""
        if not moves_forward(info, self._current_info):
            return False
        loaded = _served(self._registry, info, self._device)  # beside the one serving
        with self._lock:
            before = self._current.checkpoint_id
            self._current, self._current_info = loaded, info
            self.switches += 1
        log.info("serving: switched from %s to %s", before, info.checkpoint_id)
        return True

    @property
    def current_id(self) -> str:
        return self._current.checkpoint_id

    def pin(self, info: CheckpointInfo) -> None:
        """Load ``info`` beside the followed checkpoint, for an arm that names it."""
        loaded = _served(self._registry, info, self._device)
        with self._lock:
            self._pinned[info.checkpoint_id] = loaded

    def unpin(self, checkpoint_id: str) -> None:
        with self._lock:
            self._pinned.pop(checkpoint_id, None)

    def load_adapter(self, name: str, path: Path) -> None:
        """A peft adapter directory over the followed checkpoint's base, served as ``name``."""
        from peft import PeftModel

        info = self._current_info
        base = load_base(Path(info.model.base_path), expect_sha256=info.model.base_sha256)
        model = PeftModel.from_pretrained(base.model, str(path)).to(self._device)
        model.eval()
        served = Served(name, info.model.identity(), CausalLMPolicy(model, base.tokenizer))
        with self._lock:
            self._adapters[name] = served
        log.info("serving: adapter %s loaded from %s over %s", name, path, info.checkpoint_id)

    # --- sampling ----------------------------------------------------------------------------
    async def chat(self, asked: BackendRequest[Served, ChatCompletionRequest]) -> Generation:
        served, request = asked.target, asked.request
        own = defines_tools(served.policy.tokenizer.chat_template)
        if asked.splice is not None:
            prompt = _spliced(served.policy, asked.splice, own)
        elif own and request.uses_tools():  # the model's own template renders the tools
            prompt = served.policy.chat_prompt(*request.template_inputs())
        else:
            prompt = served.policy.chat_prompt(request.prompt_messages())
        top_n = request.top_logprobs or 0
        return await self._sample(asked, prompt, top_n)

    async def complete(self, asked: BackendRequest[Served, CompletionRequest]) -> Generation:
        served, request = asked.target, asked.request
        if isinstance(request.prompt, str):
            prompt = list(served.policy.tokenizer(request.prompt).input_ids)
        else:
            prompt = list(request.prompt)
        return await self._sample(asked, prompt, request.logprobs or 0)

    async def _sample(self, asked: BackendRequest[Served, Any], prompt: list[int],
                      top_n: int = 0) -> Generation:  # fmt: skip
        """The completion; with ``on_step``, each token is also passed to it (on this event
        loop) as a :class:`Step` as soon as it is drawn. ``top_n``: each token's likeliest
        alternatives, from the distribution it was drawn from."""
        served, params, constraint = asked.target, asked.params, asked.constraint
        served.policy.check_tokens(prompt, "the prompt")
        context = getattr(served.policy.model.config, "max_position_embeddings", None)
        check_length(len(prompt), params.max_tokens, context)  # fresh prompts too: never cut
        tokenizer = served.policy.tokenizer

        def decode(ids: Sequence[int]) -> str:
            return str(tokenizer.decode(list(ids), skip_special_tokens=True))

        def named(top: TopTokens) -> Alternatives:
            return tuple((decode((t,)), lp) for t, lp in top[:top_n])

        on_token = None
        if asked.on_step is not None:
            on_token = _to_loop(asked.on_step, Increments(decode, params.stop), tuple(prompt),
                                named if top_n else None)  # fmt: skip
        done: Completion = await asyncio.wrap_future(
            self.batcher.submit(served.policy, prompt, params, on_token, top_n, constraint)
        )
        pieces = text_pieces(decode, done.token_ids, done.text)
        return Generation(
            served.checkpoint_id,
            served.identity,
            tuple(prompt),
            done.token_ids,
            done.logprobs,
            done.text,
            done.finish_reason,
            pieces,
            tuple(map(named, done.top)) if top_n else None,
            constraint,
        )

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        await asyncio.to_thread(self.batcher.close)


def _to_loop(on_step: Callable[[Step], None], increments: Increments, prompt: tuple[int, ...],
             named: Callable[[TopTokens], Alternatives] | None = None) -> JobToken:  # fmt: skip
    """A job's ``on_token`` for the batcher's thread that hands each token to the running event
    loop, where it becomes a step (the first carries the prompt's ids) for ``on_step``. The
    steps arrive before the job's result does: both are queued on the loop in drawing order."""
    loop = asyncio.get_running_loop()
    first = [prompt]

    def step(token_id: int, logprob: float, top: TopTokens) -> None:  # on the event loop
        piece = increments.push(token_id)
        prompt_ids = first.pop() if first else None
        tops = (named(top),) if named is not None else None
        on_step(Step(piece, (token_id,), (logprob,), (piece,), prompt_ids, tops))

    def on_token(token_id: int, logprob: float, top: TopTokens) -> None:  # batcher's thread
        try:
            loop.call_soon_threadsafe(step, token_id, logprob, top)
        except RuntimeError:  # the loop is closed (shutting down): nobody is left to stream to
            pass

    return on_token


def _spliced(policy: CausalLMPolicy, splice: Splice, own_tools: bool = False) -> list[int]:
    """An extending call's prompt: the earlier ids, then the continuation tokenised on its own
    (``serving.splice``); its length is checked with every prompt's (``_sample``).
    ``own_tools``: the model's template renders tool results itself."""
    rendered = policy.tokenizer.apply_chat_template(
        splice.template_messages(own_tools), add_generation_prompt=True, tokenize=False
    )
    continuation = policy.tokenizer(continuation_of(rendered), add_special_tokens=False).input_ids
    return splice.prompt(continuation)
