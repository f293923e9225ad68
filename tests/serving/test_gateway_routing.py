"""Which checkpoint serves a request: a checkpoint announced while 50 requests are in flight
fails none of them and every rollout names the one checkpoint that produced it (its
log-probabilities are that checkpoint's, not the other's); an experiment's split is 50/50 over
2,000 users within 3 points, sticky per user, stamped on the rollout and in the answer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import openai
import torch

from checkpoints.publish import publish_checkpoint
from checkpoints.weights import load_policy
from infra.tenancy import scoped_key
from models.rollout import Experiment, Rollout
from serving.assignment import assignment_unit
from serving.routing import parse_arms
from tests.support.checkpoints import register_variant
from tests.support.gateway import Serve, api_key, rollouts

ASK = [{"role": "user", "content": "Write `clamp(lo, hi)` in Python."}]


def _serve(tmp: Path, registry, bootstrap: str, prefix: str, *extra: str) -> tuple[Serve, str]:
    key = api_key(tmp / "keys.sqlite")
    return Serve(
        [
            "--registry",
            str(registry.root),
            "--checkpoint",
            "t-0000",
            "--key-db",
            str(tmp / "keys.sqlite"),
            "--bootstrap",
            bootstrap,
            "--topic-prefix",
            prefix,
            *extra,
        ],
        tmp / "serve.log",
    ), key


def _scores(registry, checkpoint: str, batch: list[Rollout]) -> list[torch.Tensor]:
    policy = load_policy(registry, registry.get(checkpoint))
    with torch.no_grad():
        return policy.score(
            [list(r.prompt_ids) for r in batch], [list(r.completion_ids) for r in batch]
        )


def test_a_checkpoint_announced_under_load_mixes_no_request(tmp_path, registry, kafka_bootstrap,
                                                            topic_names):  # fmt: skip
    newer = register_variant(registry, "t-0001", "t-0000", seed=7)
    serve, key = _serve(
        tmp_path,
        registry,
        kafka_bootstrap,
        topic_names.prefix,
        "--max-batch",
        "4",
        "--max-tokens",
        "12",
    )
    client = openai.AsyncOpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0)

    async def ask(i: str) -> tuple[str, str, float]:
        raw = await client.chat.completions.with_raw_response.create(
            model="default", messages=ASK, extra_headers={"X-Rtrl-Interaction-Id": i}
        )
        raw.parse()
        return i, raw.headers["x-rtrl-checkpoint-id"], time.monotonic()

    async def load() -> tuple[list, float, list]:
        first = [asyncio.create_task(ask(f"a-{n}")) for n in range(50)]
        await asyncio.sleep(0.3)
        publish = asyncio.create_task(asyncio.to_thread(
            publish_checkpoint, kafka_bootstrap, topic_names.checkpoints, newer))  # fmt: skip
        while not publish.done():  # the load goes on however long the producer takes (CI)
            first.append(asyncio.create_task(ask(f"a-{len(first)}")))
            await asyncio.sleep(0.05)
        await publish
        announced = time.monotonic()
        first += [asyncio.create_task(ask(f"a-{len(first) + n}")) for n in range(20)]
        answered = await asyncio.gather(*first)  # raises if one failed
        later: list = []
        for wave in range(60):  # until the new checkpoint answers
            later += await asyncio.gather(*(ask(f"b-{wave}-{n}") for n in range(5)))
            if any(c == "t-0001" for _, c, _ in later):
                break
        return answered, announced, later

    try:
        answered, announced, later = asyncio.run(load())
    finally:
        serve.stop()
    assert len(answered) >= 70
    assert any(t > announced for _, _, t in answered), "the announcement came after the load"
    by_header = {i: c for i, c, _ in answered + later}
    assert set(by_header.values()) == {"t-0000", "t-0001"}
    got = rollouts(kafka_bootstrap, topic_names.rollouts, len(by_header))
    assert set(got) == set(by_header)
    for checkpoint, other in (("t-0000", "t-0001"), ("t-0001", "t-0000")):
        batch = [r for r in got.values() if r.checkpoint_id == checkpoint]
        assert batch and all(by_header[r.interaction_id] == checkpoint for r in batch)
        own, others = _scores(registry, checkpoint, batch), _scores(registry, other, batch)
        for rollout, mine, theirs in zip(batch, own, others, strict=True):
            recorded = torch.tensor(rollout.logprobs)
            assert torch.allclose(mine, recorded, atol=1e-4), rollout.interaction_id
            assert not torch.allclose(theirs, recorded, atol=1e-3), rollout.interaction_id


def test_a_split_is_even_sticky_and_stamped(tmp_path, registry, kafka_bootstrap, topic_names):
    register_variant(registry, "t-0001", "t-0000", seed=7)
    split = parse_arms("exp-1", "A=current:50,B=t-0001:50")
    users = [f"user-{n}" for n in range(2000)]
    arms = [split.assign(u).name for u in users]
    assert abs(arms.count("A") / len(users) - 0.5) <= 0.03
    assert arms == [split.assign(u).name for u in users]  # sticky

    serve, key = _serve(
        tmp_path,
        registry,
        kafka_bootstrap,
        topic_names.prefix,
        "--max-tokens",
        "2",
        "--no-follow",
        "--experiment",
        "exp-1",
        "--arms",
        "A=current:50,B=t-0001:50",
    )
    client = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0)
    expected: dict[str, tuple[str, str]] = {}
    try:
        for user in users[:20]:
            for k in range(2):
                interaction = f"{user}-{k}"
                raw = client.chat.completions.with_raw_response.create(
                    model="default",
                    messages=ASK,
                    extra_headers={"X-Rtrl-User-Id": user, "X-Rtrl-Interaction-Id": interaction},
                )
                arm = split.assign(scoped_key("acme", user))  # the key's organisation's user
                assert raw.headers["x-rtrl-experiment"] == f"exp-1:{arm.name}"
                checkpoint = "t-0000" if arm.checkpoint == "current" else arm.checkpoint
                assert raw.headers["x-rtrl-checkpoint-id"] == checkpoint
                expected[interaction] = (arm.name, checkpoint)
        # Without the header: the request's `user`, else the API key; never the interaction id
        # (which put one caller's requests in both arms). Eight interactions of each.
        for unit, user in (("end-user-3", "end-user-3"),
                           (assignment_unit(None, None, f"Bearer {key}"), None)):  # fmt: skip
            arm = split.assign(scoped_key("acme", unit))
            checkpoint = "t-0000" if arm.checkpoint == "current" else arm.checkpoint
            for k in range(8):
                interaction = f"{unit}-{k}"
                raw = client.chat.completions.with_raw_response.create(
                    model="default", messages=ASK, extra_headers={"X-Rtrl-Interaction-Id":
                    interaction}, **({"user": user} if user else {}))  # fmt: skip
                assert raw.headers["x-rtrl-experiment"] == f"exp-1:{arm.name}"
                expected[interaction] = (arm.name, checkpoint)
    finally:
        serve.stop()
    assert {a for a, _ in expected.values()} == {"A", "B"}
    got = rollouts(kafka_bootstrap, topic_names.rollouts, len(expected))
    assert {i: (r.experiment, r.checkpoint_id) for i, r in got.items()} == {
        i: (Experiment("exp-1", arm), ckpt) for i, (arm, ckpt) in expected.items()
    }
    assert {r.org_id for r in got.values()} == {"acme"}  # the API key's, on every rollout
