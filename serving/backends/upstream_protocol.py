"""What the gateway says to an OpenAI-compatible upstream and reads back, apart from I/O.

The request (:func:`upstream_body`): only fields the rollout records or that leave the sampling
distribution as it is, so that an answer's log-probabilities are those of the distribution the
rollout names; the answer (:func:`parse_chat`, :func:`parse_completion`): token ids and
log-probabilities as the upstream gave them. Pure, so that both are tested without a server.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import orjson

from models.generation import Alternatives, Generation
from models.rollout import ModelIdentity
from models.sampling import SamplingParams
from models.tool_format import Call

UpstreamTools = Literal["pass", "render"]  # how an upstream gets a request's tools


class UpstreamError(RuntimeError):
    """The upstream refused or failed: ``status`` and ``body`` are passed to the client."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.body = body


def bad_gateway(message: str) -> UpstreamError:
    """A 502 in OpenAI's error shape, for an upstream that could not be asked or answered amiss."""
    return UpstreamError(
        502, orjson.dumps({"error": {"message": message, "type": "upstream_error"}})
    )


# --- answers (pure) ------------------------------------------------------------------------
def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and value and all(type(t) is int for t in value):
        return tuple(value)
    return None


def _alternatives(entries: Any) -> Alternatives | None:
    """A token's ``top_logprobs`` as the upstream gave them: chat's ``[{token, logprob}]`` or a
    completion's ``{token: logprob}``, likeliest first.

    >>> _alternatives([{"token": "a", "logprob": -0.1}]), _alternatives({"b": -2.0, "a": -0.5})
    ((('a', -0.1),), (('a', -0.5), ('b', -2.0)))
    """
    if isinstance(entries, dict):
        pairs = [(str(t), float(lp)) for t, lp in entries.items()]
    elif isinstance(entries, list):
        pairs = [(str(e.get("token", "")), float(e["logprob"])) for e in entries]
    else:
        return None
    return tuple(sorted(pairs, key=lambda p: -p[1]))


def _all_alternatives(per_token: list[Any]) -> tuple[Alternatives, ...] | None:
    tops = [_alternatives(entries) for entries in per_token]
    if not tops or any(t is None for t in tops):
        return None
    return tuple(t for t in tops if t is not None)


def _calls(message: dict[str, Any]) -> tuple[Call, ...] | None:
    """The answer's ``tool_calls`` as the upstream read them (None: it has none), each with its
    arguments as the upstream wrote them (JSON text, checked by the gateway, never repaired).

    >>> _calls({"tool_calls": [{"id": "x", "type": "function", "function": {
    ...     "name": "f", "arguments": '{"a": 1}'}}]})
    (Call(name='f', arguments='{"a": 1}'),)
    """
    listed = message.get("tool_calls")
    if not isinstance(listed, list) or not listed:
        return None
    calls = []
    for call in listed:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise bad_gateway("the upstream's tool call has no function")
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append(Call(str(function.get("name") or ""), text))
    return tuple(calls)


def parse_chat(
    body: dict[str, Any], checkpoint_id: str = "", model: ModelIdentity | None = None
) -> Generation:
    """The generation in a chat completion answer, by ``checkpoint_id`` of ``model``; its
    ``tool_calls`` None unless the upstream answered with calls.

    >>> g = parse_chat({"prompt_token_ids": [1, 2], "choices": [{"message": {"content": "ab"},
    ...     "finish_reason": "stop", "token_ids": [5, 6], "logprobs": {"content": [
    ...     {"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.0}]}}]})
    >>> g.prompt_ids, g.token_ids, g.logprobs, g.pieces
    ((1, 2), (5, 6), (-0.5, -1.0), ('a', 'b'))
    >>> parse_chat({"choices": [{"message": {"content": "ab"}, "finish_reason": "stop"}]}).logprobs
    """
    choice = body["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content") or ""
    content = (choice.get("logprobs") or {}).get("content")
    logprobs = pieces = tops = None
    if isinstance(content, list) and content:
        logprobs = tuple(float(c["logprob"]) for c in content)
        pieces = tuple(str(c.get("token", "")) for c in content)
        tops = _all_alternatives([c.get("top_logprobs") for c in content])
    prompt = _ids(body.get("prompt_token_ids")) or _ids(choice.get("prompt_token_ids"))
    return Generation(
        checkpoint_id,
        model,
        prompt,
        _ids(choice.get("token_ids")),
        logprobs,
        text,
        str(choice.get("finish_reason") or "stop"),
        pieces if pieces is not None and "".join(pieces) == text else None,
        tops,
        tool_calls=_calls(message),
    )


def parse_completion(
    body: dict[str, Any], checkpoint_id: str = "", model: ModelIdentity | None = None
) -> Generation:
    """The generation in a (legacy) completion answer, by ``checkpoint_id`` of ``model``.

    >>> g = parse_completion({"choices": [{"text": "ab", "finish_reason": "length",
    ...     "prompt_token_ids": [1], "token_ids": [5], "logprobs": {"tokens": ["ab"],
    ...     "token_logprobs": [-0.25], "text_offset": [0]}}]})
    >>> g.prompt_ids, g.token_ids, g.logprobs, g.finish_reason
    ((1,), (5,), (-0.25,), 'length')
    """
    choice = body["choices"][0]
    text = choice.get("text") or ""
    lp = choice.get("logprobs") or {}
    values = lp.get("token_logprobs")
    logprobs = pieces = tops = None
    if isinstance(values, list) and values and all(isinstance(v, (int, float)) for v in values):
        logprobs = tuple(float(v) for v in values)
        listed = lp.get("top_logprobs")
        if isinstance(listed, list) and len(listed) == len(values):
            tops = _all_alternatives(listed)
        tokens = lp.get("tokens")
        if isinstance(tokens, list) and "".join(map(str, tokens)) == text:
            pieces = tuple(map(str, tokens))
    return Generation(
        checkpoint_id,
        model,
        _ids(choice.get("prompt_token_ids")),
        _ids(choice.get("token_ids")),
        logprobs,
        text,
        str(choice.get("finish_reason") or "stop"),
        pieces,
        tops,
    )


# What a request may say and still be recorded whole: what the rollout records (temperature,
# top_p, the token budget, stop strings), what says what to answer rather than how to sample,
# and a seed (which draw, not which distribution). Anything else could change the distribution
# the tokens are drawn from while the rollout says otherwise, and is refused by name.
# The tools say what may be answered; under ``tool_choice: required`` or a named function the
# upstream decodes under a constraint of its own, which the rollout cannot record, so the
# backend refuses those rollouts (``UpstreamBackend.chat``).
FORWARDED = frozenset(
    {
        "model", "messages", "prompt", "stream", "stream_options", "n", "user", "seed",
        "metadata", "logprobs", "top_logprobs", "return_token_ids", "echo",
        "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop",
        "tools", "tool_choice", "parallel_tool_calls",
    }
)  # fmt: skip
# Sampling parameters sent with their neutral value on every request, so that an upstream's
# own defaults (vLLM applies the model's generation_config.json: some set top_k or a
# repetition penalty) do not change the distribution either. A client may send exactly these.
NEUTRAL: dict[str, Any] = {"top_k": -1, "min_p": 0.0, "presence_penalty": 0.0,
                           "frequency_penalty": 0.0, "repetition_penalty": 1.0}  # fmt: skip
ALSO_NEUTRAL: dict[str, tuple[Any, ...]] = {"top_k": (0,), "logit_bias": ({},), "min_tokens": (0,)}


def _neutral(field: str, value: Any) -> bool:
    """Whether ``value`` of ``field`` leaves the distribution as it is (null: as if not sent)."""
    if value is None or value in ALSO_NEUTRAL.get(field, ()):
        return True
    return field in NEUTRAL and value == NEUTRAL[field] and type(value) is not bool


def unrecorded_parameter(field: str) -> UpstreamError:
    """A 400 in OpenAI's error shape naming ``field``, a parameter the rollout would not record."""
    message = (
        f"{field}: not supported: it would change the sampling distribution without the rollout "
        "recording it (the gateway records temperature, top_p, max_tokens and stop)"
    )
    error = {"message": message, "type": "invalid_request_error",
             "code": "unrecorded_sampling_parameter", "param": field}  # fmt: skip
    return UpstreamError(400, orjson.dumps({"error": error}))


def upstream_body(raw: dict[str, Any], model: str, chat: bool, params: SamplingParams
                  ) -> dict[str, Any]:  # fmt: skip
    """The client's request as sent upstream: only fields the rollout records or that do not
    change the sampling distribution (any other one raises :func:`unrecorded_parameter`), the
    recorded sampling parameters ``params`` stated explicitly and the others at their neutral
    value, our model name, not streamed, log-probabilities and token ids asked for.

    >>> body = upstream_body({"model": "x", "stream": True, "messages": []}, "m", True,
    ...                      SamplingParams(temperature=0.7, max_tokens=8))
    >>> {k: body[k] for k in ("model", "stream", "temperature", "top_p", "max_tokens", "top_k")}
    {'model': 'm', 'stream': False, 'temperature': 0.7, 'top_p': 1.0, 'max_tokens': 8, 'top_k': -1}
    >>> upstream_body({"prompt": "a", "min_p": 0.1}, "m", False, SamplingParams())
    Traceback (most recent call last):
    ...
    serving.backends.upstream_protocol.UpstreamError: upstream answered 400
    """
    for field, value in raw.items():
        if field not in FORWARDED and not _neutral(field, value):
            raise unrecorded_parameter(field)
    body = {k: v for k, v in raw.items() if k in FORWARDED}
    body.pop("stream_options", None)
    body.pop("max_completion_tokens", None)
    body.update(NEUTRAL)
    body.update(model=model, stream=False, temperature=params.temperature, top_p=params.top_p,
                max_tokens=params.max_tokens, stop=list(params.stop),
                logprobs=True if chat else raw.get("logprobs") or 0,
                return_token_ids=True)  # fmt: skip
    return body
