"""`rtrl serve` on the tiny model answers as OpenAI's published OpenAPI document says, for every
endpoint, streaming included, called with the official Python client and the official Node
client: chat (whole, streamed with and without ``stream_options.include_usage``), completions
(whole and streamed), models, and errors (an unknown model's 404 ``model_not_found``, a 400).

The schemas are those of ``openai/openai-openapi`` kept in ``openai_schemas.json`` (source and
commit in its ``source``; ``extract_openai_schemas.py`` makes it), checked with JSON Schema
2020-12. Two readings of the document: its OpenAPI 3.0 ``nullable: true`` (which 2020-12 does not
know) is read as "or null"; and a streamed completion's chunk is ``CreateCompletionResponse``
(the document: "both the streamed and non-streamed response objects share the same shape") with
a null ``finish_reason`` allowed before the last chunk, as OpenAI's own streams send it.

The ``top_logprobs`` alternatives are real: sorted, the chosen token's log-probability equal to
its entry when it is among them, and the top of the distribution the token was drawn from (the
model's, after temperature and top-p), recomputed here from the checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import torch
from openai.types.chat import ChatCompletionMessageParam

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from models.sampling import sampling_log_probs
from tests.support.gateway import Serve, ServedSetup
from tests.support.openai_schema import COMPLETION_CHUNK, check

HERE = Path(__file__).parent
NODE = HERE / "node"
ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Write `mean(xs)` in Python."}]


def test_the_checks_refuse_what_the_schema_refuses() -> None:
    """The validator sees the schema: what it must refuse, it refuses."""
    good = {"error": {"message": "m", "type": "t", "param": None, "code": None}}
    check("ErrorResponse", good)
    for bad in ({"error": {"message": "m", "type": "t"}}, {"error": {**good["error"], "code": 1}}):
        with pytest.raises(AssertionError):
            check("ErrorResponse", bad)
    choice: dict[str, Any] = {"index": 0, "delta": {"content": "x"}}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [choice]}  # fmt: skip
    with pytest.raises(AssertionError, match="finish_reason"):
        check("CreateChatCompletionStreamResponse", chunk)
    choice["finish_reason"] = None
    check("CreateChatCompletionStreamResponse", chunk)


# --- the server -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served_setup() -> ServedSetup:
    """One `rtrl serve` for the module (nothing recorded: the rollouts are other tests')."""
    return ServedSetup(options=("--max-tokens", "8"))


def sse_events(client: openai.OpenAI, path: str, body: dict[str, Any]) -> list[Any]:
    """A stream's events as sent, each chunk parsed (the last one is ``[DONE]``)."""
    endpoint: Any = client.chat.completions if path == "/chat/completions" else client.completions
    with endpoint.with_streaming_response.create(**body) as response:
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    return [line[6:] if line == "data: [DONE]" else json.loads(line[6:]) for line in lines]


def checked_chunks(client: openai.OpenAI, path: str, body: dict[str, Any],
                   schema: str) -> list[Any]:  # fmt: skip
    """A stream's chunks, each checked against ``schema``, the stream ended by ``[DONE]``."""
    events = sse_events(client, path, body)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    for chunk in chunks:
        check(schema, chunk)
    return chunks


# --- chat -----------------------------------------------------------------------------------
def test_chat_whole_answers_validate(client: openai.OpenAI) -> None:
    extras: list[dict[str, Any]] = [{}, {"logprobs": True}, {"logprobs": True, "top_logprobs": 20}]
    for extra in extras:
        raw = client.chat.completions.with_raw_response.create(
            model="default", messages=ASK, **extra
        )
        body = raw.http_response.json()
        check("CreateChatCompletionResponse", body)
        parsed = raw.parse()
        assert parsed.choices[0].message.refusal is None
        assert body["choices"][0]["message"]["refusal"] is None
        logprobs = body["choices"][0]["logprobs"]
        if not extra:
            assert logprobs is None
        else:
            shown = parsed.choices[0].logprobs
            assert shown is not None and shown.content is not None
            assert logprobs["refusal"] is None and len(logprobs["content"]) == len(shown.content)
    private = client.chat.completions.with_raw_response.create(
        model="t-0000", messages=ASK, extra_headers={"X-Rtrl-Privacy-Mode": "true"}
    ).http_response.json()
    check("CreateChatCompletionResponse", private)
    assert "logprobs" in private["choices"][0] and private["choices"][0]["logprobs"] is None


@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_streams_validate_chunk_by_chunk(client: openai.OpenAI, include_usage: bool) -> None:
    body: dict[str, Any] = {"model": "default", "messages": ASK, "stream": True,
                            "logprobs": True, "top_logprobs": 2}  # fmt: skip
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    chunks = checked_chunks(client, "/chat/completions", body, "CreateChatCompletionStreamResponse")
    assert all(("usage" in chunk) == include_usage for chunk in chunks)
    with_choices = [c for c in chunks if c["choices"]]
    reasons = [c["choices"][0]["finish_reason"] for c in with_choices]
    assert all(r is None for r in reasons[:-1]) and reasons[-1] in ("stop", "length")
    if include_usage:
        last = chunks[-1]
        assert last["choices"] == [] and last["usage"]["total_tokens"] > 0
        assert all(c["usage"] is None for c in chunks[:-1])
        n = sum(len((c["choices"][0]["logprobs"] or {}).get("content") or []) for c in chunks[:-1])
        assert last["usage"]["completion_tokens"] == n
    else:
        assert len(with_choices) == len(chunks)
    # and the client parses them, the usage included
    parsed = list(client.chat.completions.create(**body))  # type: ignore[call-overload]
    assert (parsed[-1].usage is not None) == include_usage


# --- completions ----------------------------------------------------------------------------
def test_completions_whole_and_streamed_validate(client: openai.OpenAI) -> None:
    extras: list[dict[str, Any]] = [{}, {"logprobs": 0}, {"logprobs": 5}]
    for extra in extras:
        raw = client.completions.with_raw_response.create(
            model="default", prompt="def mean(xs):", **extra
        )
        body = raw.http_response.json()
        check("CreateCompletionResponse", body)
        assert (body["choices"][0]["logprobs"] is None) == (not extra)
        raw.parse()
    for include_usage in (False, True):
        request: dict[str, Any] = {"model": "default", "prompt": "def mean(xs):", "stream": True,
                                   "logprobs": 3}  # fmt: skip
        if include_usage:
            request["stream_options"] = {"include_usage": True}
        chunks = checked_chunks(client, "/completions", request, COMPLETION_CHUNK)
        with_choices = [c for c in chunks if c["choices"]]
        reasons = [c["choices"][0]["finish_reason"] for c in with_choices]
        assert all(r is None for r in reasons[:-1]) and reasons[-1] in ("stop", "length")
        for chunk in with_choices[:-1]:
            check("CreateCompletionResponse", {**chunk, "choices": [
                {**chunk["choices"][0], "finish_reason": "stop"}]})  # fmt: skip
        assert all("usage" not in c for c in chunks[:-1])  # not even null: the schema says so
        if include_usage:
            assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
        else:
            assert chunks[-1]["usage"]["total_tokens"] > 0


# --- models and errors ----------------------------------------------------------------------
def test_models_and_errors_validate(client: openai.OpenAI, served: tuple[Serve, str]) -> None:
    raw = client.models.with_raw_response.list()
    body = raw.http_response.json()
    check("ListModelsResponse", body)
    for model in body["data"]:
        check("Model", model)
    names = [m.id for m in raw.parse()]
    assert names == ["t-0000", "default"]
    for name in names:  # every listed name is served
        client.chat.completions.create(model=name, messages=ASK, max_tokens=2)

    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-4o", messages=ASK)
    assert missing.value.status_code == 404
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    assert missing.value.type == "invalid_request_error"
    check("ErrorResponse", missing.value.response.json())
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-3.5-turbo-instruct", prompt="x")

    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model="default", prompt="x", logprobs=6)
    assert bad.value.param == "logprobs"
    check("ErrorResponse", bad.value.response.json())
    serve, _ = served
    unauthorised = httpx.get(f"{serve.url}/v1/models", timeout=10)
    assert unauthorised.status_code == 401
    check("ErrorResponse", unauthorised.json())


# --- the alternatives are real --------------------------------------------------------------
def _distributions(registry: CheckpointRegistry, prompt: list[int], completion: list[int],
                   temperature: float, top_p: float) -> torch.Tensor:  # fmt: skip
    """``[T, V]``: the sampling distribution each completion token was drawn from."""
    policy = load_policy(registry, registry.get("t-0000"))
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0]
    positions = range(len(prompt) - 1, len(prompt) + len(completion) - 1)
    return sampling_log_probs(logits[list(positions)], temperature, top_p)


def test_top_logprobs_are_the_top_of_the_distribution_sampled(
    client: openai.OpenAI, registry: CheckpointRegistry
) -> None:
    temperature, top_p, n = 0.8, 0.95, 5
    raw = client.chat.completions.with_raw_response.create(
        model="default", messages=ASK, logprobs=True, top_logprobs=n, temperature=temperature,
        top_p=top_p, max_tokens=8, extra_body={"return_token_ids": True},
    )  # fmt: skip
    body = raw.http_response.json()
    choice = body["choices"][0]
    entries = choice["logprobs"]["content"]
    token_ids = choice["token_ids"]
    assert len(entries) == len(token_ids) > 0
    dists = _distributions(registry, body["prompt_token_ids"], token_ids, temperature, top_p)
    policy_tokenizer = load_policy(registry, registry.get("t-0000")).tokenizer
    for entry, token, dist in zip(entries, token_ids, dists, strict=True):
        alts = entry["top_logprobs"]
        values = [a["logprob"] for a in alts]
        assert 0 < len(alts) <= n and values == sorted(values, reverse=True)
        assert abs(entry["logprob"] - float(dist[token])) < 1e-3  # the distribution sampled
        top = dist.topk(len(alts))
        assert [a["token"] for a in alts] == [
            policy_tokenizer.decode([int(t)]) for t in top.indices
        ]
        assert max(abs(a - float(b)) for a, b in zip(values, top.values, strict=True)) < 1e-3
        if entry["logprob"] >= values[-1]:  # the chosen token is among them, with its log-prob
            assert any(a["logprob"] == entry["logprob"] for a in alts)
        assert sum(torch.tensor(values).exp().tolist()) <= 1 + 1e-4

    text = client.completions.create(
        model="default", prompt="def mean(xs):", logprobs=3, temperature=temperature,
        top_p=top_p, max_tokens=8,
    )  # fmt: skip
    lp = text.choices[0].logprobs
    assert lp is not None and lp.top_logprobs is not None
    assert len(lp.top_logprobs) == len(lp.token_logprobs or [])
    for chosen, top_of in zip(lp.token_logprobs or [], lp.top_logprobs, strict=True):
        assert 0 < len(top_of) <= 3
        if chosen >= min(top_of.values()):
            assert chosen in top_of.values()


# --- the Node client ------------------------------------------------------------------------
def test_the_official_node_client_gets_answers_that_validate(served: tuple[Serve, str]) -> None:
    node = shutil.which("node")
    assert node is not None, "Node is required (scripts/bootstrap installs the client)"
    assert (NODE / "node_modules" / "openai").is_dir(), "run scripts/bootstrap (npm ci)"
    serve, key = served
    done = subprocess.run(
        [node, "answers.mjs"], cwd=NODE, capture_output=True, text=True, timeout=120,
        env={**os.environ, "RTRL_URL": f"{serve.url}/v1", "RTRL_KEY": key},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    check("CreateChatCompletionResponse", out["chat"])
    assert all(
        len(e["top_logprobs"]) <= 3 for e in out["chat"]["choices"][0]["logprobs"]["content"]
    )
    for chunk in out["chat_stream"]:
        check("CreateChatCompletionStreamResponse", chunk)
    assert out["chat_stream"][-1]["choices"] == [] and out["chat_stream"][-1]["usage"]
    check("CreateCompletionResponse", out["completion"])
    for chunk in out["completion_stream"]:
        check(COMPLETION_CHUNK, chunk)
    assert out["completion_stream"][-1]["choices"][0]["finish_reason"] in ("stop", "length")
    check("ListModelsResponse", out["models"])
    missing = out["unknown_model"]
    assert missing["status"] == 404 and missing["code"] == "model_not_found"
    assert missing["param"] == "model"
    check("Error", missing["body"])
    assert out["bad_request"]["status"] == 400
    check("Error", out["bad_request"]["body"])
