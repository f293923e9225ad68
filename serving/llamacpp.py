"""llama.cpp's ``llama-server`` as the upstream: exact prompt and completion ids, and behaviour
log-probabilities of the distribution the learner scores.

llama.cpp's OpenAI endpoints give no prompt ids, and their ``logprobs.content`` leaves out every
token that ends inside a multi-byte character (the server holds such a token back until the
character is whole, and its probability with it). So each completion is asked in three steps,
each exact by construction:

1. ``POST /apply-template`` (chat) turns the messages into the prompt text by the model's own
   chat template, as llama.cpp's chat endpoint would;
2. ``POST /tokenize`` (``add_special`` and ``parse_special``, as its completion endpoint
   tokenises text) gives the prompt's ids;
3. ``POST /completion`` with those ids as the prompt: the model sees exactly the recorded ids, and
   ``return_tokens`` answers every sampled id.

**Behaviour log-probabilities.** By default llama.cpp reports each token's probability under the
model's plain softmax, *before* its sampler chain (``get_token_probabilities`` on the raw logits);
with ``post_sampling_probs`` it reports the probability in the candidates the chain left, after
its final softmax: the distribution the token was drawn from. Its default chain also runs top-k
40 and min-p 0.05 and applies the temperature *after* top-p. ``models.sampling`` divides by the
temperature first, then keeps the nucleus; so the request names that chain, ``samplers:
["temperature", "top_p"]``, and asks for the post-sampling probabilities: what is recorded is
``sampling_log_probs`` of llama.cpp's logits. Only the recorded sampling parameters are sent
(temperature, top-p, the token budget, stop strings); nothing else shapes the draw.

**Stop strings.** A whole ``/completion`` answer leaves out the probabilities of as many final
tokens as the stop string has when tokenised on its own (not necessarily those it was sampled
as). Streamed, the server sends every sampled id with its probability, the stop string's
included, one event each: so a request with stop strings is asked streamed and its events
joined (:func:`joined_stream`). Its rollout holds every sampled id up to the one that completed
the stop string, as the learner's own sampler records it; the text stops before the string.

A completion whose log-probabilities llama.cpp does not give for every sampled id (a token
ending inside a multi-byte character, which it never sends on its own) is served, and its
rollout refused as ``missing_logprobs`` or ``missing_token_ids``: never filled in.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import httpx
import orjson

from checkpoints.record import CheckpointInfo
from models.rollout import ModelIdentity
from models.sampling import LOGPROB_FLOOR, SamplingParams
from serving.generation import Generation
from serving.upstream import Route, UpstreamBackend, bad_gateway

log = logging.getLogger(__name__)
LLAMA_CPP = "llama.cpp"
OPENAI = "openai"
KINDS = ("auto", OPENAI, LLAMA_CPP)
SAMPLERS = ["temperature", "top_p"]  # models.sampling's order: temperature, then the nucleus
_TEMPLATE_FIELDS = ("messages", "tools", "tool_choice", "chat_template_kwargs")
_FINISH = {"eos": "stop", "word": "stop", "limit": "length"}


# --- requests and answers (pure) -----------------------------------------------------------
def completion_body(prompt_ids: list[int], params: SamplingParams) -> dict[str, Any]:
    """The native ``/completion`` request for ``prompt_ids`` sampled with ``params``.

    >>> b = completion_body([1, 2], SamplingParams(temperature=0.7, top_p=0.9, max_tokens=8))
    >>> b["prompt"], b["n_predict"], b["samplers"], b["post_sampling_probs"]
    ([1, 2], 8, ['temperature', 'top_p'], True)
    """
    return {
        "prompt": prompt_ids,
        "n_predict": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "samplers": SAMPLERS,
        "stop": list(params.stop),
        "n_probs": 1,
        "post_sampling_probs": True,
        "return_tokens": True,
        "cache_prompt": True,
        "stream": False,
    }


def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and value and all(type(t) is int for t in value):
        return tuple(value)
    return None


def parse_native(
    answer: dict[str, Any],
    prompt_ids: tuple[int, ...],
    checkpoint_id: str = "",
    model: ModelIdentity | None = None,
) -> Generation:
    """The generation in a native ``/completion`` answer to ``prompt_ids``.

    >>> a = {"content": "ab", "stop_type": "eos", "tokens": [5, 6, 2],
    ...      "completion_probabilities": [{"id": 5, "token": "a", "prob": 0.5},
    ...      {"id": 6, "token": "b", "prob": 1.0}, {"id": 2, "token": "", "prob": 0.25}]}
    >>> g = parse_native(a, (1,))
    >>> g.token_ids, [round(x, 4) for x in g.logprobs], g.pieces, g.finish_reason
    ((5, 6, 2), [-0.6931, 0.0, -1.3863], ('a', 'b', ''), 'stop')
    >>> parse_native({**a, "tokens": [5, 7, 6, 2]}, (1,)).logprobs is None  # one held back
    True
    """
    text = str(answer.get("content") or "")
    tokens = _ids(answer.get("tokens"))
    probs = answer.get("completion_probabilities")
    logprobs = pieces = None
    if tokens is not None and isinstance(probs, list) and len(probs) == len(tokens):
        values = [p.get("prob") if isinstance(p, dict) else None for p in probs]
        same = all(
            isinstance(p, dict) and p.get("id") == t for p, t in zip(probs, tokens, strict=True)
        )
        if same and all(isinstance(v, int | float) and 0 < v <= 1 for v in values):
            logprobs = tuple(max(math.log(float(v)), LOGPROB_FLOOR) for v in values)  # type: ignore[arg-type]
            joined = tuple(str(p.get("token", "")) for p in probs)
            pieces = joined if "".join(joined) == text else None
    return Generation(
        checkpoint_id,
        model,
        prompt_ids or None,
        tokens,
        logprobs,
        text,
        _FINISH.get(str(answer.get("stop_type")), "stop"),
        pieces,
    )


def joined_stream(body: bytes) -> dict[str, Any]:
    """A streamed ``/completion`` answer (server-sent events) as the whole answer would be, but
    with the probability of every token the stream gave; ``tokens`` None when the stream left
    one out (its count of tokens predicted says more).

    >>> events = [{"content": "a", "tokens": [5], "stop": False,
    ...            "completion_probabilities": [{"id": 5, "token": "a", "prob": 0.5}]},
    ...           {"content": "", "tokens": [6], "stop": False,
    ...            "completion_probabilities": [{"id": 6, "token": "", "prob": 0.25}]},
    ...           {"content": "", "tokens": [], "stop": True, "stop_type": "word",
    ...            "tokens_predicted": 2}]
    >>> body = b"".join(b"data: " + orjson.dumps(e) + bytes([10, 10]) for e in events)
    >>> a = joined_stream(body)
    >>> a["content"], a["tokens"], len(a["completion_probabilities"]), a["stop_type"]
    ('a', [5, 6], 2, 'word')
    >>> joined_stream(body.replace(b'"tokens_predicted":2', b'"tokens_predicted":3'))["tokens"]
    """
    events = [orjson.loads(line[6:]) for line in body.splitlines() if line.startswith(b"data: ")]
    final = next((e for e in events if isinstance(e, dict) and e.get("stop") is True), None)
    if final is None:
        error = next((e["error"] for e in events if isinstance(e, dict) and "error" in e), None)
        raise bad_gateway(f"llama-server's streamed /completion did not finish: {error}"[:300])
    parts = [e for e in events if isinstance(e, dict) and e.get("stop") is False]
    tokens = [t for e in parts for t in e.get("tokens") or []]
    return {
        "content": "".join(str(e.get("content") or "") for e in parts),
        "tokens": tokens if len(tokens) == final.get("tokens_predicted") else None,
        "completion_probabilities": [
            p for e in parts for p in e.get("completion_probabilities") or []
        ],
        "stop_type": final.get("stop_type"),
    }


def is_llama_cpp(props: Any) -> bool:
    """Whether a ``GET /props`` answer is llama-server's.

    >>> is_llama_cpp({"default_generation_settings": {}, "build_info": "b1"}), is_llama_cpp({})
    (True, False)
    """
    return isinstance(props, dict) and "default_generation_settings" in props


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


# --- the backend ---------------------------------------------------------------------------
class LlamaCppBackend(UpstreamBackend):
    """An upstream that is llama-server: its native endpoints, so that every id is exact.
    Checkpoints: the base it was started on; a promoted LoRA or full-weights checkpoint is
    reported (counted, logged) and serving stays where it was, as for any upstream that cannot
    load it at runtime (``rtrl serve --engine llama.cpp`` starts a server for each checkpoint
    instead: ``serving.llamacpp_switch``)."""

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

    async def chat(
        self, route: Route, request: Any, raw: dict[str, Any], params: Any, on_step: Any = None
    ) -> Generation:
        template = {k: raw[k] for k in _TEMPLATE_FIELDS if k in raw}
        prompt = (await self._call(route, "/apply-template", template)).get("prompt")
        if not isinstance(prompt, str):
            raise bad_gateway("llama-server's /apply-template gave no prompt")
        return await self._generate(route, prompt, params)

    async def complete(
        self, route: Route, request: Any, raw: dict[str, Any], params: Any, on_step: Any = None
    ) -> Generation:
        return await self._generate(route, raw["prompt"], params)

    async def _generate(self, route: Route, prompt: str | list[int], params: Any) -> Generation:
        if isinstance(prompt, str):
            asked = {"content": prompt, "add_special": True, "parse_special": True}
            ids = _ids((await self._call(route, "/tokenize", asked)).get("tokens"))
            if ids is None:
                raise bad_gateway("llama-server's /tokenize gave no token ids")
        else:
            ids = tuple(prompt)
        body = completion_body(list(ids), params)
        if params.stop:  # streamed: the whole answer drops the stop string's probabilities
            body["stream"] = True
            streamed = await self._post_body("/completion", body, self._url_of(route))
            answer = joined_stream(streamed)
        else:
            answer = await self._call(route, "/completion", body)
        return parse_native(answer, ids, route.checkpoint_id, route.identity)

    def _url_of(self, route: Route) -> str:
        """The llama-server that serves ``route``: this upstream's."""
        return self.url

    async def _call(self, route: Route, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = await self._post(path, body, self._url_of(route))
        if not isinstance(data, dict):
            raise bad_gateway(f"llama-server's {path} answered no JSON object")
        return data
