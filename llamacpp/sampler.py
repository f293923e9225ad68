"""A checkpoint sampled by llama.cpp where a transformers policy would sample it: the evals'
sampler (``chat_prompt``, ``sample``), over a ``llama-server`` of its own.

Why: on two CPU cores llama.cpp decodes SmolLM2 three to four times faster than the learner's
transformers sampler (bench/RESULTS.md), and with an exact engine (``EngineSettings.exact``:
the learner's dequantized weights) it samples the same distribution, its log-probabilities the
learner's to ~1e-5 nats a token. The code world's held-out evals sample 40 answers a
checkpoint; through here they take seconds instead of a minute.

Prompts and answers go as the gateway sends them (``serving.backends.llamacpp``): the chat
through the server's own template and tokenizer, the ids to ``/completion`` with the recorded
sampling parameters only, each request seeded from the caller's generator: the same generator draws
the same seeds for every checkpoint, as the transformers sampler's evals do. The answers are
close to reproducible, not bit for bit: a request's arithmetic depends on what it is batched
with, which can flip a near tie (the test: 23 of 24 tokens shared on average, none with other
seeds). Up to ``in_flight`` requests are decoded together (the server's slots).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import torch

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from llamacpp.convert import EngineWeights
from llamacpp.fleet import EngineFleet, EngineSettings, ServedEngine
from llamacpp.native import completion_body, joined_stream, parse_native
from models.generation import Generation
from models.policy import Completion
from models.sampling import SamplingParams

log = logging.getLogger(__name__)
SEED_RANGE = 2**31 - 1  # llama.cpp's seed is a uint32; -1 (0xFFFFFFFF) means "random"
RETRY_WAITS_S = (2.0, 10.0)  # before the second and the third try of a request


class EngineSampler:
    """Samples from the ``llama-server`` at ``url`` as ``CausalLMPolicy`` samples."""

    device = torch.device("cpu")  # where the caller's generator lives

    def __init__(self, url: str, in_flight: int = 16, timeout_s: float = 300,
                 lora: list[dict[str, float]] | None = None) -> None:  # fmt: skip
        """``lora``: the adapter each request names, on a server shared by several checkpoints
        (``ServedEngine.lora``)."""
        self.url = url.rstrip("/")
        self.in_flight = in_flight
        self._adapter = {} if lora is None else {"lora": lora}
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s)

    def chat_prompt(self, messages: Sequence[dict[str, Any]],
                    tools: Sequence[dict[str, Any]] | None = None) -> list[int]:  # fmt: skip
        """Token ids of a chat ready for the assistant's turn, by the server's template; tools
        are not taken here (llama-server renders them only under ``--jinja``, not run)."""
        if tools:
            raise ValueError("the llama.cpp sampler renders no tools: give them as text")
        prompt = self._post("/apply-template", {"messages": list(messages)}).get("prompt")
        if not isinstance(prompt, str):
            raise RuntimeError("llama-server's /apply-template gave no prompt")
        asked = {"content": prompt, "add_special": True, "parse_special": True}
        tokens = self._post("/tokenize", asked).get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            raise RuntimeError("llama-server's /tokenize gave no token ids")
        return tokens

    def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               generator: torch.Generator) -> list[Completion]:  # fmt: skip
        """One completion per prompt, in order; each request's seed is drawn from
        ``generator`` first, so the answers do not depend on which finishes first."""
        seeds = torch.randint(0, SEED_RANGE, (len(prompts),), generator=generator).tolist()
        with ThreadPoolExecutor(max_workers=max(1, self.in_flight)) as pool:
            done = pool.map(lambda p, seed: self._one(p, seed, params), prompts, seeds)
            return [_completion(g) for g in done]

    def _one(self, prompt: Sequence[int], seed: int, params: SamplingParams) -> Generation:
        body = {**completion_body(list(prompt), params), "seed": seed, **self._adapter}
        if params.stop:  # streamed: a whole answer drops the stop string's probabilities
            body["stream"] = True
            answer = self._send("/completion", body)
            return parse_native(joined_stream(answer.content), tuple(prompt))
        return parse_native(self._post("/completion", body), tuple(prompt))

    def _send(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST ``body``, once more on a fresh connection when the server had closed the
        reused one before answering (llama-server closes a keep-alive connection after a
        streamed answer or a few requests, and httpx does not resend), and again after
        ``RETRY_WAITS_S`` when it timed out, could not connect or answered 503 (a server
        starved of CPU, restarting or still loading): safe, since every request here is
        seeded or reads nothing but its body. The last failure is raised."""
        for wait in (*RETRY_WAITS_S, None):
            try:
                try:
                    answer = self._http.post(path, json=body)
                except httpx.RemoteProtocolError:
                    answer = self._http.post(path, json=body)
                if answer.status_code != 503 or wait is None:
                    answer.raise_for_status()
                    return answer
                failure = "503 Service Unavailable"
            except (httpx.TimeoutException, httpx.ConnectError) as exc:
                if wait is None:
                    raise
                failure = f"{type(exc).__name__}: {exc}"
            log.warning("llama-server %s%s: %s; trying again in %g s", self.url, path, failure,
                        wait)  # fmt: skip
            time.sleep(wait)
        raise AssertionError("unreachable: the last try returns or raises")

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = self._send(path, body).json()
        if not isinstance(data, dict):
            raise RuntimeError(f"llama-server's {path} answered no JSON object")
        return data

    def close(self) -> None:
        self._http.close()


def _completion(generation: Generation) -> Completion:
    """A completion as the evals read it; an answer whose ids or log-probs llama.cpp held back
    (a token ending inside a multi-byte character) keeps its text, with what it gave."""
    return Completion(
        token_ids=tuple(generation.token_ids or ()),
        logprobs=tuple(generation.logprobs or ()),
        finish_reason=generation.finish_reason,
        text=generation.text,
    )


@contextmanager
def engine_sampler(settings: EngineSettings, registry: CheckpointRegistry,
                   info: CheckpointInfo) -> Iterator[EngineSampler]:  # fmt: skip
    """A sampler on a server of its own for ``info`` (its GGUF files converted first when
    needed, cached), stopped on the way out."""
    fleet = EngineFleet(settings, registry)
    with _sampler_of(fleet, lambda: fleet.start(info)) as sampler:
        yield sampler


@contextmanager
def shared_samplers(
    settings: EngineSettings, registry: CheckpointRegistry, members: dict[str, EngineWeights]
) -> Iterator[dict[str, EngineSampler]]:
    """A sampler for each of ``members`` (checkpoint id: GGUF files on one model, a parent and
    the candidate the gate is judging), all on one server that loaded their adapters
    (``EngineFleet.start_shared``), stopped on the way out: one start, and one model in memory."""
    fleet = EngineFleet(settings, registry)
    try:
        engine = fleet.start_shared(members)
        samplers = {c: EngineSampler(engine.url, settings.slots, lora=engine.lora(c))
                    for c in members}  # fmt: skip
        try:
            yield samplers
        finally:
            for sampler in samplers.values():
                sampler.close()
    finally:
        fleet.close()


@contextmanager
def _sampler_of(fleet: EngineFleet, start: Callable[[], ServedEngine]) -> Iterator[EngineSampler]:
    try:
        sampler = EngineSampler(start().url, fleet.settings.slots)
        try:
            yield sampler
        finally:
            sampler.close()
    finally:
        fleet.close()
