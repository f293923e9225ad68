"""The train/serve mismatch check against a fake upstream: a small real HTTP server that samples
the tiny model at the requested temperature, as vLLM does, and answers with either the
processed log-probabilities (of the distribution sampled from) or the raw ones (the model's own
softmax, vLLM's default ``--logprobs-mode raw_logprobs``). Its answers go through the gateway's
own upstream client and rollout builder into batches. The model is the tiny one with its logits
scaled by 4 (about 3.9 nats per token at T = 0.7, an LLM's range): the tiny model itself is so
near uniform that temperature hardly changes it (raw against processed: k1 -0.015, k3 0.005,
inside the limit, and as harmless to the importance weights as it is small). A round must
quarantine the raw batch (not train on it, say so in the record, never offer it again) and
train on the processed one.
The forwarded body is checked here too: the recorded parameters stated, the others neutral,
an unrecorded one refused by name before the upstream is asked."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import orjson
import pytest
import torch

from checkpoints.weights import load_policy, register_base
from models.examples import Example
from models.sampling import SamplingParams
from release.gate import GateConfig
from serving.backends.upstream import UpstreamBackend
from serving.backends.upstream_protocol import UpstreamError
from serving.rollouts.build import rollout_of
from tests.support.backend_requests import chat_asked
from tests.support.checkpoints import TASKS, TS, low_token_share, write_batch
from tests.support.rounds import round_options
from trainer.inputs import OfferedBatch, untrained
from trainer.learner import LearnerConfig
from trainer.mismatch import mismatch_of
from trainer.train import train_round

PARAMS = SamplingParams(temperature=0.7, max_tokens=6)
LEARNER = LearnerConfig(lr=2e-3, epochs=1, minibatches=2, micro_batch=16, kl_coef=0.1)
GATE = GateConfig(eval_prompts=0, min_examples=1, min_gain=-100, max_kl=100)


@pytest.fixture
def sharp(registry, tmp_path):
    """A root ``s-0000``: the tiny model with its logits scaled by 4 (its final norm's weight)."""
    policy = load_policy(registry, registry.get("t-0000"))
    with torch.no_grad():
        policy.model.model.norm.weight.mul_(4.0)
    path = tmp_path / "sharp-model"
    policy.model.save_pretrained(path)
    policy.tokenizer.save_pretrained(path)
    return register_base(registry, "s-0000", path)


class FakeUpstream:
    """``POST /v1/chat/completions`` sampled with ``policy``; ``raw``: log-probs at T = 1."""

    def __init__(self, policy, raw: bool) -> None:
        self.bodies: list[dict] = []
        generator = torch.Generator().manual_seed(7)
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                upstream.bodies.append(body)
                prompt = policy.chat_prompt(body["messages"])
                params = SamplingParams(temperature=body["temperature"], top_p=body["top_p"],
                                        max_tokens=body["max_tokens"])  # fmt: skip
                done = policy.sample([prompt], params, generator)[0]
                logprobs = list(done.logprobs)
                if raw:
                    with torch.no_grad():
                        logprobs = policy.score([prompt], [done.token_ids], 1.0, 1.0)[0].tolist()
                text = policy.tokenizer.decode(list(done.token_ids))
                answer = {
                    "prompt_token_ids": prompt,
                    "choices": [{
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": done.finish_reason,
                        "token_ids": list(done.token_ids),
                        "logprobs": {"content": [{"token": "", "logprob": lp}
                                                 for lp in logprobs]},
                    }],
                }  # fmt: skip
                data = orjson.dumps(answer)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _serve_through_gateway(registry, tmp_path, raw: bool, n: int, prefix: str):
    """``n`` chat completions at T = 0.7 through the gateway's upstream client; their rollouts
    rewarded by the hidden taste, and the bodies the upstream received."""
    policy = load_policy(registry, registry.get("s-0000"))

    async def ask(backend: UpstreamBackend) -> list[Example]:
        examples = []
        for i in range(n):
            ask = [{"role": "user", "content": f"Write `{TASKS[i % 5]}` #{i}."}]
            request = {"model": "m", "temperature": 0.7, "max_tokens": 6, "messages": ask}
            gen = await backend.chat(chat_asked(backend.current, request, PARAMS))
            rollout = rollout_of(gen, f"{prefix}-{i}", PARAMS, None, TS)
            assert not isinstance(rollout, str), rollout
            reward = 1.0 if low_token_share(policy, rollout.completion_ids) > 0.3 else -0.5
            examples.append(Example(rollout, reward))
        await backend.close()
        return examples

    with FakeUpstream(policy, raw) as upstream:
        backend = UpstreamBackend(upstream.url, registry, "s-0000", "base", tmp_path / "ad")
        examples = asyncio.run(ask(backend))
    return examples, upstream.bodies


def test_the_forwarded_body_states_the_recorded_parameters_and_refuses_others(registry, tmp_path):
    policy = load_policy(registry, registry.get("t-0000"))
    with FakeUpstream(policy, raw=False) as upstream:
        backend = UpstreamBackend(upstream.url, registry, "t-0000", "base", tmp_path / "ad")
        ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

        async def chat(extra: dict) -> object:
            try:
                asked = chat_asked(backend.current, {**ask, **extra}, PARAMS)
                return await backend.chat(asked)
            finally:
                await backend.close()

        asyncio.run(chat({"top_k": -1, "logit_bias": {}, "seed": 3}))  # neutral: forwarded
        for field, value in [("top_k", 20), ("min_p", 0.1), ("presence_penalty", 0.5),
                             ("logit_bias", {"5": 10}), ("guided_json", {})]:  # fmt: skip
            with pytest.raises(UpstreamError) as refused:
                asyncio.run(chat({field: value}))
            error = orjson.loads(refused.value.body)["error"]
            assert refused.value.status == 400 and error["param"] == field, error
            assert error["type"] == "invalid_request_error" and field in error["message"]
    assert len(upstream.bodies) == 1  # the refused requests never reached the upstream
    sent = upstream.bodies[0]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.7, 1.0, 6)
    assert (sent["top_k"], sent["min_p"], sent["repetition_penalty"]) == (-1, 0.0, 1.0)
    assert sent["seed"] == 3 and "logit_bias" not in sent and sent["stream"] is False


def test_raw_logprobs_at_temperature_07_are_quarantined_and_processed_ones_train(
        registry, sharp, tmp_path):  # fmt: skip
    raw, _ = _serve_through_gateway(registry, tmp_path, raw=True, n=40, prefix="raw")
    good, bodies = _serve_through_gateway(registry, tmp_path, raw=False, n=40, prefix="ok")
    assert all(b["temperature"] == 0.7 for b in bodies)
    files = {
        "b-raw": write_batch(tmp_path / "raw.parquet", raw, "b-raw"),
        "b-ok": write_batch(tmp_path / "ok.parquet", good, "b-ok"),
    }
    # the raw batch alone: nothing left to train on; a rejected candidate records why
    with pytest.raises(ValueError, match="quarantined"):
        train_round(registry, "s-0000", [("b-raw", [files["b-raw"]])], "s-0001",
                    round_options(registry, LEARNER, GATE), alarms=[])  # fmt: skip
    rejected = registry.get("s-0001")
    assert rejected.status == "rejected" and "b-raw" in rejected.evals["quarantined"]
    assert any("processed_logprobs" in r for r in rejected.reasons)
    figures = rejected.evals["mismatch"]["b-raw"]
    assert figures["k1"] < -0.05 and figures["k3"] > 0.05 and figures["rollouts"] == 40
    # with the processed batch: trained on it alone
    result = train_round(registry, "s-0000", [("b-raw", [files["b-raw"]]),
                         ("b-ok", [files["b-ok"]])], "s-0002",
                         round_options(registry, LEARNER, GATE), alarms=[])  # fmt: skip
    assert result is not None
    candidate = result.candidate
    assert result.n_train + result.n_held_out == 40
    assert list(candidate.evals["quarantined"]) == ["b-raw"]
    ok = candidate.evals["mismatch"]["b-ok"]
    assert ok["reason"] is None and abs(ok["k1"]) < 1e-4 and ok["k3"] < 1e-4
    assert candidate.batches == ("b-raw", "b-ok")
    # the KL penalty's reference is named in the record, with its weights' hash
    assert candidate.training.reference_id == "s-0000"
    assert candidate.training.reference_sha256 == sharp.model.base_sha256
    assert sharp.model.base_sha256 != registry.get("t-0000").model.base_sha256
    assert registry.get("s-0001").training.reference_id is None  # no update, no reference
    # a quarantined batch is never offered again, not even beside a new one
    offered = [OfferedBatch("b-raw", "s-0000", ("raw",)), OfferedBatch("b-new", "s-0000", ("n",))]
    assert [b for b, _ in untrained(offered, registry, "s-0000", tmp_path)] == ["b-new"]


def test_the_verdict_reads_a_negative_k1_as_a_mismatch_too():
    # recorded below the served weights on every token (k1 -0.2): no sampler gives that, yet
    # k3 is only 0.021 (inside the limit), so only the sign of k1 shows it
    below = mismatch_of([[-0.3] * 10], [[-0.1] * 10], 0.05)
    assert below.k1 == pytest.approx(-0.2) and below.k3 < 0.05 and below.reason is not None
    assert mismatch_of([[-0.3] * 10], [[-0.3001] * 10], 0.05).reason is None
    assert mismatch_of([], [], 0.05).tokens == 0
