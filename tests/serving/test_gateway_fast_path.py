"""The completions' fast path answers as FastAPI's routes do: the same statuses and errors for
the same bad requests, whole answers that are exactly what the response models describe, streams
that end, and every other route (models, probes, OpenAPI) still FastAPI's. Both apps share one
local backend on the tiny model, called in-process over ASGI. And what is answered is recorded
after the answers, together, and at the latest when the app shuts down; a rollout that fails to
build is counted, and the others are still recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import register_base
from infra.api_keys import KeyStore
from models.rollout import Rollout
from serving import completions
from serving.api import create_app
from serving.backends.local import LocalBackend
from serving.fast_path import MAX_BODY_BYTES, CompletionsFastPath
from serving.metrics import GatewayMetrics
from serving.protocol import ChatCompletionResponse, CompletionResponse
from serving.rollouts.recorder import RolloutRecorder

CHAT = {"messages": [{"role": "user", "content": "mean(xs)?"}], "max_tokens": 4}
TEXT = {"prompt": "def mean(xs):", "max_tokens": 4}
BAD = [
    ("/v1/chat/completions", {**CHAT, "max_tokens": 0}),
    ("/v1/chat/completions", {"max_tokens": 4}),
    ("/v1/chat/completions", {**CHAT, "n": 2}),
    ("/v1/chat/completions", {**CHAT, "top_logprobs": 3}),  # without logprobs: true
    ("/v1/chat/completions", {**CHAT, "logprobs": True, "top_logprobs": 21}),
    ("/v1/completions", {**TEXT, "logprobs": 6}),
    ("/v1/completions", {**TEXT, "echo": True}),
    ("/v1/completions", {**TEXT, "temperature": -1}),
    ("/v1/completions", {"prompt": ""}),
]


def local_backend(tmp: Path, tiny_model: Path) -> tuple[LocalBackend, KeyStore, str]:
    registry = CheckpointRegistry(tmp / "ckpt")
    register_base(registry, "t-0000", tiny_model)
    keys = KeyStore(tmp / "keys.sqlite")
    return LocalBackend(registry, "t-0000"), keys, keys.create("acme")


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[tuple]:
    backend, keys, key = local_backend(tmp_path_factory.mktemp("fast"), tiny_model)
    fast, slow = create_app(backend, None, keys), create_app(backend, None, keys, fast_path=False)
    assert isinstance(fast, CompletionsFastPath) and not isinstance(slow, CompletionsFastPath)
    yield fast, slow, key
    asyncio.run(backend.close())
    keys.close()


def ask(app, path: str, body: bytes | dict, key: str | None, **headers: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            if key is not None:
                headers["Authorization"] = f"Bearer {key}"
            content = body if isinstance(body, bytes) else orjson.dumps(body)
            headers["Content-Type"] = "application/json"
            return await client.post(path, content=content, headers=headers)

    return asyncio.run(go())


@pytest.mark.parametrize(("path", "body"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_a_bad_request_is_refused_alike_with_the_same_message(apps, path, body) -> None:
    fast, slow, key = apps
    a, b = ask(fast, path, body, key), ask(slow, path, body, key)
    assert a.status_code == b.status_code == 400
    assert a.json() == b.json()
    assert a.json()["error"]["type"] == "invalid_request_error"


def test_keys_not_json_and_oversized_bodies_are_refused_alike(apps) -> None:
    fast, slow, key = apps
    for app in (fast, slow):
        for bad_key in (None, "rtrl_not-a-key"):
            refused = ask(app, "/v1/completions", TEXT, bad_key)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["error"]["code"] == "invalid_api_key"
        broken = ask(app, "/v1/completions", b'{"prompt": "x",', key)
        assert broken.status_code == 400, broken.text
        assert broken.json()["error"]["type"] == "invalid_request_error"
        too_big = ask(app, "/v1/completions", b" " * (MAX_BODY_BYTES + 1), key)
        assert too_big.status_code == 413, too_big.text
    long_id = ask(fast, "/v1/completions", TEXT, key, **{"X-Rtrl-Interaction-Id": "i" * 129})
    assert long_id.status_code == 400 and "1 to 128" in long_id.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "model"),
    [
        ("/v1/chat/completions", {**CHAT, "logprobs": True, "return_token_ids": True},
         ChatCompletionResponse),
        ("/v1/chat/completions", CHAT, ChatCompletionResponse),
        ("/v1/completions", {**TEXT, "logprobs": 0, "return_token_ids": True},
         CompletionResponse),
        ("/v1/completions", TEXT, CompletionResponse),
    ],
    ids=["chat-logprobs", "chat", "text-logprobs", "text"],
)  # fmt: skip
def test_whole_answers_are_what_their_models_describe_on_both_paths(apps, path, body, model):
    fast, slow, key = apps
    for app in (fast, slow):
        answer = ask(app, path, body, key, **{"X-Rtrl-Interaction-Id": "int-1"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-rtrl-interaction-id"] == "int-1"
        assert answer.headers["x-rtrl-checkpoint-id"] == "t-0000"
        data = answer.json()
        assert model.model_validate(data).model_dump(exclude_unset=True) == data
        choice = data["choices"][0]
        assert (choice["logprobs"] is not None) == ("logprobs" in body)
        if "logprobs" in body:
            n = data["usage"]["completion_tokens"]
            shown = choice["logprobs"]
            assert len(shown["content"] if "content" in shown else shown["token_logprobs"]) == n
            assert len(choice["token_ids"]) == n


def test_streams_end_and_other_routes_stay_fastapis(apps) -> None:
    fast, slow, key = apps
    for app in (fast, slow):
        stream = ask(app, "/v1/chat/completions", {**CHAT, "stream": True}, key)
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.text.endswith("data: [DONE]\n\n")

    async def get(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=fast)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            return await client.get(path, headers={"Authorization": f"Bearer {key}"})

    models = [m["id"] for m in asyncio.run(get("/v1/models")).json()["data"]]
    assert models == ["t-0000", "default"]
    assert asyncio.run(get("/readyz")).json()["status"] == "ready"
    spec = asyncio.run(get("/openapi.json")).json()
    for path in ("/v1/chat/completions", "/v1/completions"):
        assert spec["paths"][path]["post"]["security"] == [{"bearer": []}]
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


class Kept:
    """Stands in for Kafka's producer behind a real recorder, keeping what it is given (what
    becomes of it on Kafka is ``test_gateway_outage``'s and ``test_gateway_local``'s)."""

    def __init__(self) -> None:
        self.rollouts: list[Rollout] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery) -> None:  # noqa: ANN001
        self.rollouts.append(Rollout.from_json(value))
        on_delivery(None, None)

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0


async def shut_down(app) -> None:
    """The app's lifespan, started and ended as uvicorn does."""
    messages: asyncio.Queue[dict] = asyncio.Queue()
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        messages.put_nowait({"type": kind})
    said: list[str] = []

    async def send(message: dict) -> None:
        said.append(message["type"])

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, messages.get, send)
    assert said == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_rollouts_are_built_together_after_the_answers_and_at_shutdown(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, keys, key = local_backend(tmp_path, tiny_model)
    kept = Kept()
    # one hand-over every 2 s: longer than three answers take
    recorder = RolloutRecorder("127.0.0.1:1", "rollouts", hand_over_s=2.0, producer=kept)  # type: ignore[arg-type]
    metrics = GatewayMetrics()
    app = create_app(backend, recorder, keys, metrics=metrics)
    real_rollout_of = completions.rollout_of

    def failing_for_i1(gen, interaction, *args):  # noqa: ANN001, ANN202
        if interaction == "i-1":
            raise RuntimeError("a rollout that cannot be built")
        return real_rollout_of(gen, interaction, *args)

    monkeypatch.setattr(completions, "rollout_of", failing_for_i1)

    async def go() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:

            async def one(i: int) -> None:
                headers = {"Authorization": f"Bearer {key}", "X-Rtrl-Interaction-Id": f"i-{i}"}
                answer = await client.post("/v1/completions", json=TEXT, headers=headers)
                assert answer.status_code == 200

            await asyncio.gather(*(one(i) for i in range(4)))
            assert kept.rollouts == [] and recorder.put_aside() == 4  # answered, put aside
            await asyncio.sleep(2.5)
            assert sorted(r.interaction_id for r in kept.rollouts) == ["i-0", "i-2", "i-3"]
            assert len({r.created_at for r in kept.rollouts}) == 1  # built together
            await one(4)
            assert len(kept.rollouts) == 3
        await shut_down(app)  # well before the next 2 s are up
        assert [r.interaction_id for r in kept.rollouts][3:] == ["i-4"]

    asyncio.run(go())
    counted = metrics.registry.get_sample_value
    assert counted("rtrl_gateway_rollouts_total", {"outcome": "failed"}) == 1
    assert counted("rtrl_gateway_rollouts_total", {"outcome": "recorded"}) == 4
    recorder.close(1)
    keys.close()
