"""`rtrl serve --upstream` in front of a second, real `rtrl serve` standing as the upstream (as
vLLM would: token ids on `return_token_ids`, adapters through `/v1/load_lora_adapter`): rollouts
are recorded the same way, with the upstream's ids and log-probabilities; a promoted LoRA
checkpoint is written as a peft adapter, loaded into the upstream and served by name; a
full-weights one is reported and not served; a sampling parameter a rollout does not record is
refused with a 400 naming it; an upstream that answers without log-probabilities
(`--hide-logprobs`) is still served, and its rollouts are refused and counted."""

from __future__ import annotations

import time

import openai
import pytest
import torch

from checkpoints.publish import publish_checkpoint
from checkpoints.weights import load_policy
from tests.support.checkpoints import register_variant
from tests.support.gateway import Serve, api_key, register_lora, rollouts

ASK = [{"role": "user", "content": "Write `reverse(xs)` in Python."}]


def test_upstream_mode_records_loads_adapters_and_refuses_what_lacks_logprobs(
        tmp_path, registry, kafka_bootstrap, topic_names):  # fmt: skip
    key = api_key(tmp_path / "keys.sqlite")
    common = [
        "--registry",
        str(registry.root),
        "--checkpoint",
        "t-0000",
        "--key-db",
        str(tmp_path / "keys.sqlite"),
        "--bootstrap",
        kafka_bootstrap,
    ]
    backend = ["--no-record", "--no-follow", "--max-tokens", "8"]
    env = {"RTRL_UPSTREAM_API_KEY": key}
    upstreams: list[Serve] = []
    fronts: list[Serve] = []
    try:  # all four start at once: a front needs its upstream only for its first request
        for n, hide in enumerate(([], ["--hide-logprobs"])):
            upstreams.append(
                Serve([*common, *backend, *hide], tmp_path / f"up-{n}.log", wait=False)
            )
            fronts.append(
                Serve(
                    [
                        *common,
                        "--topic-prefix",
                        topic_names.prefix,
                        "--upstream",
                        upstreams[-1].url,
                        "--upstream-model",
                        "default",
                        "--adapter-dir",
                        str(tmp_path / f"adapters-{n}"),
                        *(["--no-follow"] if n else []),
                    ],
                    tmp_path / f"front-{n}.log",
                    env=env,
                    wait=False,
                )
            )
        for server in [*upstreams, *fronts]:
            server.wait_ready()
        front, hidden_front = fronts
        client = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)

        def chat(i: str, **kw):
            raw = client.chat.completions.with_raw_response.create(
                model="default",
                messages=ASK,
                logprobs=True,
                extra_headers={"X-Rtrl-Interaction-Id": i},
                **kw,
            )
            return raw.headers["x-rtrl-checkpoint-id"], raw.parse()

        served = {"u-chat": chat("u-chat")}
        # a sampling parameter the rollout would not record: refused by name, never forwarded
        with pytest.raises(openai.BadRequestError) as refused:
            chat("u-top-k", extra_body={"top_k": 20})
        assert (refused.value.param, refused.value.code) == (
            "top_k", "unrecorded_sampling_parameter")  # fmt: skip
        text = client.completions.create(
            model="default",
            prompt="def reverse(",
            max_tokens=5,
            extra_headers={"X-Rtrl-Interaction-Id": "u-cmpl"},
        )
        stream = client.chat.completions.create(
            model="default",
            messages=ASK,
            stream=True,
            extra_headers={"X-Rtrl-Interaction-Id": "u-s"},
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in stream)

        # a LoRA checkpoint promoted: loaded into the upstream, served by name
        lora = register_lora(registry, "t-0001", "t-0000", seed=3)
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, lora)
        deadline = time.monotonic() + 60
        while chat("probe")[0] != "t-0001":
            assert time.monotonic() < deadline, front.log.read_text()[-2000:]
            time.sleep(0.5)
        served["u-lora"] = chat("u-lora", temperature=0.7)
        # a full-weights one cannot go into a running upstream: reported, serving stays
        full = register_variant(registry, "t-0002", "t-0001", seed=4)
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, full)
        deadline = time.monotonic() + 30
        while (
            front.metrics().get(
                'rtrl_gateway_checkpoints_not_loaded_total{reason="full_weights"}', 0
            )
            < 1
        ):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert chat("u-after-full")[0] == "t-0001"

        hidden = openai.OpenAI(base_url=f"{hidden_front.url}/v1", api_key=key, max_retries=0)
        answer = hidden.chat.completions.create(
            model="default", messages=ASK, extra_headers={"X-Rtrl-Interaction-Id": "u-hidden"}
        )
        assert answer.choices[0].message.content is not None
        hidden_counts = hidden_front.metrics_when(
            'rtrl_gateway_rollouts_refused_total{reason="missing_logprobs"}', 1
        )
    finally:
        for server in [*fronts, *upstreams]:
            server.stop()

    got = rollouts(kafka_bootstrap, topic_names.rollouts, None)
    assert "u-hidden" not in got and "u-top-k" not in got and "probe" in got
    assert hidden_counts['rtrl_gateway_rollouts_refused_total{reason="missing_logprobs"}'] == 1
    assert hidden_counts['rtrl_gateway_rollouts_total{outcome="refused"}'] == 1
    policies = {c: load_policy(registry, registry.get(c)) for c in ("t-0000", "t-0001")}
    tokenizer = policies["t-0000"].tokenizer
    shown = {
        "u-chat": served["u-chat"][1].choices[0].message.content,
        "u-lora": served["u-lora"][1].choices[0].message.content,
        "u-cmpl": text.choices[0].text,
        "u-s": streamed,
    }
    for interaction, want in shown.items():
        rollout = got[interaction]
        checkpoint = "t-0001" if interaction == "u-lora" else "t-0000"
        assert rollout.checkpoint_id == checkpoint
        assert tokenizer.decode(list(rollout.completion_ids), skip_special_tokens=True) == want
        with torch.no_grad():
            scored = policies[checkpoint].score(
                [list(rollout.prompt_ids)],
                [list(rollout.completion_ids)],
                rollout.sampling.temperature,
            )[0]
        assert torch.allclose(scored, torch.tensor(rollout.logprobs), atol=1e-4), interaction
    assert got["u-lora"].sampling.temperature == 0.7
    for interaction in ("u-chat", "u-lora"):
        content = served[interaction][1].choices[0].logprobs.content
        assert [t.logprob for t in content] == list(got[interaction].logprobs)
    assert got["u-after-full"].checkpoint_id == "t-0001"
