"""`rtrl serve` on the tiny model, called with the official openai client: chat, completions and
streaming answer; each call's rollout is on Kafka with the ids the client saw, the decode of its
token ids is the returned text, and its log-probabilities are a scoring pass of the checkpoint
that served it. A stream sends each token as it is drawn. Privacy mode is served and never
recorded; a bad key is refused."""

from __future__ import annotations

import time
import uuid
from typing import Any

import openai
import pytest
import torch

from checkpoints.weights import load_policy
from infra.topics import TopicNames
from infra.topics_apply import apply_topics
from models.rollout import Rollout
from tests.support.gateway import RecordTo, ServedSetup, api_key, rollouts
from tests.support.kafka import drain

ASK = [{"role": "user", "content": "Write `mean(xs)` in Python."}]


@pytest.fixture(scope="module")
def topic_names(kafka_bootstrap: str) -> TopicNames:
    """One set of topics for the module's gateway to record on."""
    names = TopicNames(prefix=f"t{uuid.uuid4().hex[:10]}.")
    apply_topics(kafka_bootstrap, names, replication=1)
    return names


@pytest.fixture(scope="module")
def served_setup(kafka_bootstrap: str, topic_names: TopicNames) -> ServedSetup:
    """One server for the module, recording: each test uses interaction ids of its own."""
    return ServedSetup(options=("--max-tokens", "10"),
                        record_to=RecordTo(kafka_bootstrap, topic_names.prefix))  # fmt: skip


def _score(policy, prompt, completion, temperature, top_p) -> torch.Tensor:
    with torch.no_grad():
        return policy.score([list(prompt)], [list(completion)], temperature, top_p)[0]


def test_openai_client_chat_completions_and_streams_are_rollouts(
        client, registry, kafka_bootstrap, topic_names):  # fmt: skip
    seen: dict[str, dict] = {}

    def headers(i: str) -> dict[str, str]:
        return {"X-Rtrl-Interaction-Id": i}

    raw = client.chat.completions.with_raw_response.create(
        model="t-0000",
        messages=ASK,
        logprobs=True,
        temperature=0.8,
        top_p=0.9,
        extra_headers=headers("chat-1"),
        extra_body={"return_token_ids": True},
    )
    chat = raw.parse()
    assert raw.headers["x-rtrl-interaction-id"] == "chat-1"
    assert raw.headers["x-rtrl-checkpoint-id"] == "t-0000" and chat.model == "t-0000"
    seen["chat-1"] = {
        "text": chat.choices[0].message.content,
        "logprobs": [t.logprob for t in chat.choices[0].logprobs.content],
        "ids": chat.choices[0].model_extra["token_ids"],
        "prompt": chat.model_extra["prompt_token_ids"],
        "t": 0.8,
        "p": 0.9,
    }

    done = client.completions.create(
        model="t-0000",
        prompt="def mean(xs):",
        logprobs=0,
        max_tokens=6,
        extra_headers=headers("cmpl-1"),
        extra_body={"return_token_ids": True},
    )
    seen["cmpl-1"] = {
        "text": done.choices[0].text,
        "logprobs": done.choices[0].logprobs.token_logprobs,
        "ids": done.choices[0].model_extra["token_ids"],
        "t": 1.0,
        "p": 1.0,
    }

    stream = client.chat.completions.create(
        model="t-0000", messages=ASK, stream=True, logprobs=True, extra_headers=headers("chat-s")
    )
    text, lps = "", []
    for chunk in stream:
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        lps += [t.logprob for t in (choice.logprobs.content if choice.logprobs else [])]
    seen["chat-s"] = {"text": text, "logprobs": lps, "t": 1.0, "p": 1.0}

    stream = client.completions.create(
        model="t-0000",
        prompt="def clamp(",
        stream=True,
        max_tokens=5,
        extra_headers=headers("cmpl-s"),
    )
    seen["cmpl-s"] = {"text": "".join(c.choices[0].text for c in stream), "t": 1.0, "p": 1.0}

    got = {
        i: r for i, r in rollouts(kafka_bootstrap, topic_names.rollouts, None).items() if i in seen
    }
    assert set(got) == set(seen)
    policy = load_policy(registry, registry.get("t-0000"))
    for interaction, shown in seen.items():
        rollout = got[interaction]
        assert rollout.checkpoint_id == "t-0000" and rollout.experiment is None
        assert rollout.model == registry.get("t-0000").model.identity()
        assert (rollout.sampling.temperature, rollout.sampling.top_p) == (shown["t"], shown["p"])
        ids = list(rollout.completion_ids)
        assert policy.tokenizer.decode(ids, skip_special_tokens=True) == shown["text"]
        if "ids" in shown:  # what the client saw is what was recorded, untouched
            assert shown["ids"] == ids
        if "logprobs" in shown:
            assert shown["logprobs"] == list(rollout.logprobs)
        scored = _score(policy, rollout.prompt_ids, ids, shown["t"], shown["p"])
        assert torch.allclose(scored, torch.tensor(rollout.logprobs), atol=1e-4), interaction
    assert list(got["chat-1"].prompt_ids) == policy.chat_prompt(ASK) == seen["chat-1"]["prompt"]
    assert list(got["cmpl-1"].prompt_ids) == policy.tokenizer("def mean(xs):").input_ids
    assert got["cmpl-1"].sampling.max_tokens == 6 and got["chat-1"].sampling.max_tokens == 10


def test_privacy_mode_is_served_not_recorded_and_keys_are_checked(served, client,
                                                                  kafka_bootstrap,
                                                                  topic_names):  # fmt: skip
    serve, _ = served
    before = serve.metrics()
    private = client.chat.completions.with_raw_response.create(
        model="default",
        messages=ASK,
        extra_headers={"X-Rtrl-Privacy-Mode": "true", "X-Rtrl-Interaction-Id": "private-1"},
    )
    assert private.parse().choices[0].finish_reason in ("stop", "length")
    client.chat.completions.create(
        model="default", messages=ASK, extra_headers={"X-Rtrl-Interaction-Id": "public-1"}
    )
    got = rollouts(kafka_bootstrap, topic_names.rollouts, None)
    assert "public-1" in got and "private-1" not in got
    after = serve.metrics()

    def more(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    assert more('rtrl_gateway_rollouts_total{outcome="private"}') == 1
    assert more('rtrl_gateway_rollouts_total{outcome="recorded"}') == 1

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{serve.url}/v1", api_key="rtrl_wrong", max_retries=0).models.list()
    assert [m.id for m in client.models.list()] == ["t-0000", "default"]
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(model="default", messages=ASK, temperature=0)


def test_a_stream_sends_each_token_as_it_is_drawn(client, registry, kafka_bootstrap, topic_names):
    """48 tokens streamed: the first chunk arrives long before the last (it is sent when the
    first token is drawn, not when the batch is done), and what was streamed is the rollout:
    its text the decode of the rollout's token ids, its ids and log-probabilities the same.
    The tiny model now and then draws its end token early: such a stream is checked against
    its rollout too, and another is asked for, to time one of at least 24 tokens."""
    policy = load_policy(registry, registry.get("t-0000"))
    for attempt in range(4):
        interaction = f"chat-live-{attempt}"
        started = time.perf_counter()
        stream = client.chat.completions.create(
            model="t-0000",
            messages=ASK,
            stream=True,
            logprobs=True,
            max_tokens=48,
            extra_headers={"X-Rtrl-Interaction-Id": interaction},
            extra_body={"return_token_ids": True},
        )
        text, ids, lps, first, last = "", [], [], None, None
        for chunk in stream:
            choice = chunk.choices[0]
            if choice.model_extra.get("token_ids"):
                first = first or time.perf_counter() - started
            last = time.perf_counter() - started
            text += choice.delta.content or ""
            ids += choice.model_extra.get("token_ids") or []
            lps += [t.logprob for t in (choice.logprobs.content if choice.logprobs else [])]
        rollout = rollouts(kafka_bootstrap, topic_names.rollouts, None)[interaction]
        assert list(rollout.completion_ids) == ids and list(rollout.logprobs) == lps
        assert policy.tokenizer.decode(ids, skip_special_tokens=True) == text
        if len(ids) >= 24:
            break
    assert len(ids) >= 24, "the tiny model ended every stream early: nothing to time"
    assert first is not None and last is not None
    assert first < last / 2, f"first chunk at {first:.3f} s of {last:.3f} s ({len(ids)} tokens)"


def test_an_agent_runs_calls_are_rollouts_of_one_interaction(client, kafka_bootstrap, topic_names):
    """Each call of a run is a rollout of the run's interaction; the second says which answer
    it extends and how many of its prompt ids are that answer's sequence, exactly."""
    headers = {"X-Rtrl-User-Id": f"agent-{uuid.uuid4().hex[:8]}"}
    ask: Any = [{"role": "user", "content": "Write `mean(xs)` in Python."}]
    first = client.chat.completions.with_raw_response.create(
        model="default", messages=ask, extra_headers=headers
    )
    text = first.parse().choices[0].message.content
    history: Any = [*ask, {"role": "assistant", "content": text}, {"role": "user", "content": "?"}]
    second = client.chat.completions.with_raw_response.create(
        model="default", messages=history, extra_headers=headers
    )
    interaction = first.headers["x-rtrl-interaction-id"]
    assert second.headers["x-rtrl-interaction-id"] == interaction
    got = [Rollout.from_json(m.value()) for m in drain(kafka_bootstrap, topic_names.rollouts, None)]
    mine = [r for r in got if r.interaction_id == interaction]
    assert len(mine) == 2 and all(r.turn is not None for r in mine)
    parent, child = sorted(
        mine, key=lambda r: r.turn is not None and r.turn.parent_call_id is not None
    )
    assert parent.turn is not None and child.turn is not None
    assert parent.turn.parent_call_id is None and parent.turn.call_id == first.parse().id
    assert child.turn.parent_call_id == parent.turn.call_id == first.parse().id
    assert child.turn.segment == parent.turn.segment
    assert child.turn.prefix_len == len(parent.prompt_ids) + len(parent.completion_ids)
    assert child.prompt_ids[: child.turn.prefix_len] == parent.prompt_ids + parent.completion_ids


def test_two_organisations_one_interaction_id_are_two_rollouts_each_of_its_key(
    served, client, kafka_bootstrap, topic_names
):
    """The organisation comes from the API key, never the body: two organisations' callers
    sending one user id and one interaction id give two rollouts, each stamped with its key's
    organisation (the warehouse joins each to its own reward record)."""
    serve, _ = served
    other = openai.OpenAI(base_url=f"{serve.url}/v1", max_retries=0,
                          api_key=api_key(serve.log.parent / "keys.sqlite", "globex"))  # fmt: skip
    same = {"X-Rtrl-Interaction-Id": "shared-7", "X-Rtrl-User-Id": "u-1"}
    for caller in (client, other):
        caller.chat.completions.create(model="default", messages=ASK, extra_headers=same)
    stamped: list[str] = []
    deadline = time.monotonic() + 60  # each rollout is built and sent after its answer
    while len(stamped) < 2 and time.monotonic() < deadline:
        got = [Rollout.from_json(m.value()) for m in drain(kafka_bootstrap, topic_names.rollouts)]
        stamped = sorted(r.org_id or "" for r in got if r.interaction_id == "shared-7")
    assert stamped == ["acme", "globex"]
