"""llama.cpp's real server as the upstream, on the SmolLM2 GGUF that `rtrl models fetch` caches.

The rollouts it gives are exact: the prompt ids are the learner's ids for the same chat (its
tokenizer loaded by transformers from the same GGUF), the completion ids decode to the answer's
text, and the behaviour log-probabilities are those of the distribution the learner scores at the
same temperature: the per-token mismatch KL between llama.cpp (4-bit weights, its own kernels) and
the learner (the same weights dequantized to float32) stays under ``KL_LIMIT``. Through `rtrl
serve --engine llama.cpp` the gateway starts the engine itself and records the same rollouts to
Kafka.

Skipped only when the server binary is not built (``python -m llamacpp.build``, which
scripts/bootstrap runs).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, cast

import httpx
import openai
import pytest
import torch
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import model_ref
from infra.kafka_dist import default_cache_root
from infra.ports import free_port_block
from llamacpp.build import server_binary
from llamacpp.server import EngineConfig, LlamaServer
from models.catalog import fetch, models_dir
from models.generation import Generation
from models.loading import LoadedBase, load_base
from models.mismatch import mismatch
from models.policy import CausalLMPolicy
from models.rollout import Rollout
from models.sampling import SamplingParams
from serving.backends.llamacpp import LLAMA_CPP, OPENAI, LlamaCppBackend, detect_kind
from serving.rollouts.build import rollout_of
from tests.support.backend_requests import chat_asked, completion_asked
from tests.support.engine import base_registry as engine_registry
from tests.support.gateway import Serve, api_key, rollouts

BINARY = server_binary(default_cache_root(os.environ))
pytestmark = pytest.mark.skipif(
    not BINARY.is_file(),
    reason=f"llama-server is not built at {BINARY} (python -m llamacpp.build)",
)
KL_LIMIT = 0.015  # nats per token: prime-rl's limit on the train/serve mismatch
CHECKPOINT = "smol-0000"
CHATS = [
    [{"role": "user", "content": "Write `reverse(xs)` in Python."}],
    [{"role": "user", "content": "What is 17 times 3? Answer briefly."}],
    [
        {"role": "system", "content": "You answer in one sentence."},
        {"role": "user", "content": "Why is the sky blue? Café, naïve, 東京."},
    ],
]


def _messages(chat: list[dict[str, str]]) -> list[ChatCompletionMessageParam]:
    """A chat as the official client's types name it."""
    return [cast(ChatCompletionMessageParam, m) for m in chat]


@pytest.fixture(scope="module")
def base() -> LoadedBase:
    return load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))


@pytest.fixture(scope="module")
def policy(base: LoadedBase) -> CausalLMPolicy:
    return CausalLMPolicy(base.model, base.tokenizer)


@pytest.fixture(scope="module")
def engine(base: LoadedBase, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("llama") / "server.log"
    config = EngineConfig(BINARY, base.path, free_port_block(1), threads=2, slots=4)
    with LlamaServer(config, log) as server:
        yield server


def base_registry(root: Path, base: LoadedBase) -> CheckpointRegistry:
    return engine_registry(root, base, CHECKPOINT)


def test_rollouts_are_exact_and_the_learner_scores_them_as_sampled(
    engine: LlamaServer, base: LoadedBase, policy: CausalLMPolicy, tmp_path: Path
) -> None:
    registry = base_registry(tmp_path / "registry", base)
    backend = LlamaCppBackend(engine.url, registry, CHECKPOINT, "smol", tmp_path / "adapters")
    params = SamplingParams(temperature=0.7, top_p=1.0, max_tokens=32)

    async def ask() -> list[Generation]:
        route = backend.current
        try:
            gens = [await backend.chat(chat_asked(route, {"messages": m}, params)) for m in CHATS]
            prompt = {"prompt": "def add(a, b):"}
            gens.append(await backend.complete(completion_asked(route, prompt, params)))
            return gens
        finally:
            await backend.close()

    gens = asyncio.run(ask())
    tokenizer = base.tokenizer
    for chat, gen in zip(CHATS, gens, strict=False):
        assert list(gen.prompt_ids or ()) == policy.chat_prompt(chat)
    assert list(gens[-1].prompt_ids or ()) == tokenizer("def add(a, b):").input_ids
    records = []
    for gen in gens:
        if gen.logprobs is None:
            # llama.cpp leaves out the log-prob of a token that ends inside a multi-byte
            # character (serving.backends.llamacpp): a completion cut there by max_tokens has no
            # rollout
            assert gen.finish_reason == "length" and not gen.text.isascii(), gen
            assert rollout_of(gen, "i", params, None, "2026-12-02T00:00:00Z") == "missing_logprobs"
            continue
        assert gen.token_ids, gen
        assert len(gen.logprobs) == len(gen.token_ids)
        assert tokenizer.decode(list(gen.token_ids), skip_special_tokens=True) == gen.text
        if gen.finish_reason == "stop":
            assert gen.token_ids[-1] in policy.end_ids  # the end token is kept, as sampled
        else:
            assert gen.finish_reason == "length" and len(gen.token_ids) == params.max_tokens
        rollout = rollout_of(gen, "i", params, None, "2026-12-02T00:00:00Z")
        assert isinstance(rollout, Rollout) and rollout.sampling.temperature == 0.7
        assert rollout.model == model_ref(base).identity()
        records.append(rollout)

    assert len(records) >= len(gens) - 1  # at most one is cut inside a character
    with torch.no_grad():
        scored = policy.score(
            [list(r.prompt_ids) for r in records], [list(r.completion_ids) for r in records], 0.7
        )
    served = mismatch([r.logprobs for r in records], [s.tolist() for s in scored])
    assert served.kl_k3 < KL_LIMIT, served
    # the plain softmax (temperature 1: what llama.cpp reports without post_sampling_probs) is
    # another distribution, and the same check sees it
    with torch.no_grad():
        raw = policy.score(
            [list(r.prompt_ids) for r in records], [list(r.completion_ids) for r in records], 1.0
        )
    assert mismatch([r.logprobs for r in records], [s.tolist() for s in raw]).kl_k3 > KL_LIMIT


def test_rtrl_serve_engine_records_exact_rollouts(
    base: LoadedBase, policy: CausalLMPolicy, tmp_path: Path, kafka_bootstrap: str, topic_names
) -> None:
    """Every request is seeded (the gateway passes ``seed`` to llama-server), so each draw is
    the same on every run. One token after "東" is a piece of a character: an unpatched
    llama-server gives it without a probability (its rollout refused); our build
    (``llamacpp/patches/grammar-first.patch``) keeps its id and probability, so it is recorded
    like any other answer."""
    registry = base_registry(tmp_path / "registry", base)
    key = api_key(tmp_path / "keys.sqlite")
    front = Serve(
        ["--registry", str(registry.root), "--key-db", str(tmp_path / "keys.sqlite"),
         "--bootstrap", kafka_bootstrap, "--topic-prefix", topic_names.prefix, "--no-follow",
         "--engine", "llama.cpp", "--engine-slots", "2", "--max-tokens", "24"],
        tmp_path / "front.log",
    )  # fmt: skip
    try:
        client = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)

        def ask(interaction: str) -> ChatCompletion:
            return client.chat.completions.create(
                model="default",
                messages=_messages(CHATS[0]),
                logprobs=True,
                temperature=0.8,
                seed=11,
                extra_headers={"X-Rtrl-Interaction-Id": interaction},
            )

        chat, again = ask("l-chat"), ask("l-again")
        text = client.completions.create(
            model="default",
            prompt="def add(a, b):",
            max_tokens=12,
            seed=12,
            extra_headers={"X-Rtrl-Interaction-Id": "l-cmpl"},
        )
        stream = client.chat.completions.create(
            model="default",
            messages=_messages(CHATS[1]),
            stream=True,
            seed=13,
            extra_headers={"X-Rtrl-Interaction-Id": "l-stream"},
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in stream)
        cut = client.completions.create(
            model="default",
            prompt="Tokyo in Japanese is 東",
            max_tokens=1,
            seed=1,
            extra_headers={"X-Rtrl-Interaction-Id": "l-cut"},
        )
        counts = front.metrics_when('rtrl_gateway_rollouts_total{outcome="recorded"}', 5)
        ready = httpx.get(f"{front.url}/readyz", timeout=10).json()  # what `rtrl run` reads
        assert detect_kind(front.url) == OPENAI  # the gateway is no llama-server
    finally:
        assert front.stop() == 0, front.log.read_text()[-3000:]

    assert chat.choices[0].message.content == again.choices[0].message.content  # one draw
    assert cut.choices[0].finish_reason == "length" and cut.choices[0].text  # served
    assert counts['rtrl_gateway_rollouts_total{outcome="recorded"}'] == 5, counts
    assert counts.get('rtrl_gateway_rollouts_total{outcome="refused"}', 0) == 0, counts
    assert ready["refused_rollouts"] == {}, ready
    got = rollouts(kafka_bootstrap, topic_names.rollouts, 5)
    assert len(got["l-cut"].completion_ids) == 1 and len(got["l-cut"].logprobs) == 1
    tokenizer = base.tokenizer
    shown = {
        "l-chat": chat.choices[0].message.content,
        "l-cmpl": text.choices[0].text,
        "l-stream": streamed,
    }
    for interaction, want in shown.items():
        rollout = got[interaction]
        assert rollout.checkpoint_id == CHECKPOINT
        assert tokenizer.decode(list(rollout.completion_ids), skip_special_tokens=True) == want
    assert got["l-again"].completion_ids == got["l-chat"].completion_ids
    assert list(got["l-chat"].prompt_ids) == policy.chat_prompt(CHATS[0])
    assert list(got["l-stream"].prompt_ids) == policy.chat_prompt(CHATS[1])
    assert list(got["l-cmpl"].prompt_ids) == tokenizer("def add(a, b):").input_ids
    assert got["l-chat"].sampling.temperature == 0.8 and got["l-cmpl"].sampling.max_tokens == 12
    logprobs = chat.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    content = logprobs.content
    assert [t.logprob for t in content] == list(got["l-chat"].logprobs)


def test_the_upstream_kind_is_detected(engine: LlamaServer) -> None:
    assert detect_kind(engine.url) == LLAMA_CPP
    assert detect_kind(f"http://127.0.0.1:{free_port_block(1)}") == OPENAI  # nobody there


def test_completions_with_stop_strings_are_recorded_exactly(
    engine: LlamaServer, base: LoadedBase, policy: CausalLMPolicy, tmp_path: Path
) -> None:
    """A whole llama.cpp answer drops the probabilities of a stop string's tokens; asked
    streamed, every sampled id comes with its own, so the rollout is recorded: every id up to
    the one that completed the stop string (as the learner's sampler records it), the text cut
    before the string, the log-probabilities those the learner scores."""
    registry = base_registry(tmp_path / "registry", base)
    backend = LlamaCppBackend(engine.url, registry, CHECKPOINT, "smol", tmp_path / "adapters")
    counting = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    asks: list[tuple[dict[str, Any], SamplingParams]] = [
        ({"messages": counting}, SamplingParams(temperature=0.7, max_tokens=32, stop=("5",))),
        ({"prompt": "def add(a, b):"}, SamplingParams(temperature=0.7, max_tokens=24,
                                                      stop=("return", "\n\n"))),
    ] * 3  # fmt: skip
    # seeded draws: the completions' seeds end at the budget on a token whose text could begin
    # "return" (" or"), which llama-server holds back and never sends; the gateway asks it of
    # /detokenize, so the text shown is every sampled id's (unseeded, the test met it by chance)
    seeds = (2, 172, 5, 244, 7, 274)
    asks = [
        ({**raw, "seed": seed}, params) for seed, (raw, params) in zip(seeds, asks, strict=True)
    ]

    async def ask() -> list[Generation]:
        route = backend.current
        try:
            return [
                await backend.chat(chat_asked(route, raw, params))
                if "messages" in raw
                else await backend.complete(completion_asked(route, raw, params))
                for raw, params in asks
            ]
        finally:
            await backend.close()

    gens = asyncio.run(ask())
    tokenizer = base.tokenizer
    records, stopped = [], 0
    for (_, params), gen in zip(asks, gens, strict=True):
        rollout = rollout_of(gen, "i", params, None, "2026-12-02T00:00:00Z")
        if rollout == "missing_token_ids":
            # an unpatched streamed llama-server never sends the id of a token that ended in a
            # character of several bytes (its text is sent with the next token, its id never):
            # such an answer is refused and counted, not recorded with ids the model did not give
            assert gen.token_ids is None and any(ord(c) > 127 for c in gen.text), gen
            continue
        assert isinstance(rollout, Rollout), (rollout, gen)
        records.append(rollout)
        decoded = tokenizer.decode(list(gen.token_ids or ()), skip_special_tokens=True)
        hits = [decoded.find(s) for s in params.stop if s in decoded]
        if hits:
            stopped += 1
            assert gen.finish_reason == "stop" and gen.text == decoded[: min(hits)]
            before = tokenizer.decode(list(gen.token_ids or ())[:-1], skip_special_tokens=True)
            assert not any(s in before for s in params.stop)  # its last id completed the string
        else:
            assert gen.text == decoded
    assert stopped >= 2, [g.text for g in gens]
    with torch.no_grad():
        scored = policy.score(
            [list(r.prompt_ids) for r in records], [list(r.completion_ids) for r in records], 0.7
        )
    served = mismatch([r.logprobs for r in records], [s.tolist() for s in scored])
    assert served.kl_k3 < KL_LIMIT, served
