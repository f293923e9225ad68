"""A checkpoint per organisation at the gateway: an organisation's promoted checkpoint, announced
on the checkpoints topic, serves that organisation's requests (its API key's, never its body's)
while every other organisation is served the shared checkpoint; naming another organisation's
checkpoint as the model is refused with ``foreign_checkpoint`` and counted; ``/v1/models``
lists no other organisation's checkpoint; when the shared line moves, the line grown on the old
shared checkpoint stops serving, and a newer checkpoint of the line answers every request once
the gateway has it."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import pytest

from checkpoints.publish import publish_checkpoint
from checkpoints.store import CheckpointRegistry
from tests.support.checkpoints import register_variant
from tests.support.gateway import Serve, api_key

ASK: list = [{"role": "user", "content": "Write `clamp(lo, hi)` in Python."}]


def _served_by(client: openai.OpenAI, user: str, model: str = "default") -> str:
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=ASK, max_tokens=2, extra_headers={"X-Rtrl-User-Id": user}
    )
    raw.parse()
    return raw.headers["x-rtrl-checkpoint-id"]


def _until(client: openai.OpenAI, checkpoint: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while _served_by(client, "u-probe") != checkpoint:
        assert time.monotonic() < deadline, f"{checkpoint} never served"
        time.sleep(0.2)


Gateway = tuple[Serve, openai.OpenAI, openai.OpenAI]


def _gateway(tmp_path: Path, registry: CheckpointRegistry, kafka_bootstrap: str,
             topic_names, *extra: str) -> Gateway:  # noqa: ANN001  # fmt: skip
    """The gateway on t-0000, following the topic, and a client for acme and one for globex."""
    keys = tmp_path / "keys.sqlite"
    acme_key, globex_key = api_key(keys, "acme"), api_key(keys, "globex")
    serve = Serve(["--registry", str(registry.root), "--checkpoint", "t-0000",
                   "--key-db", str(keys), "--bootstrap", kafka_bootstrap,
                   "--topic-prefix", topic_names.prefix, "--max-tokens", "2", *extra],
                  tmp_path / "serve.log")  # fmt: skip
    acme = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=acme_key, max_retries=0)
    globex = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=globex_key, max_retries=0)
    return serve, acme, globex


def test_each_organisation_is_served_its_own_line_and_refused_another_s(
    tmp_path: Path, registry: CheckpointRegistry, kafka_bootstrap: str, topic_names
) -> None:
    acme_1 = register_variant(registry, "acme-0001", "t-0000", seed=1, org_id="acme")
    serve, acme, globex = _gateway(tmp_path, registry, kafka_bootstrap, topic_names)
    try:
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, acme_1)
        _until(acme, "acme-0001")
        # the same user id in both organisations: the key decides, never the id or the body
        assert {_served_by(acme, f"u-{n}") for n in range(8)} == {"acme-0001"}
        assert {_served_by(globex, f"u-{n}") for n in range(8)} == {"t-0000"}

        with pytest.raises(openai.PermissionDeniedError) as refused:
            _served_by(globex, "u-1", model="acme-0001")
        assert refused.value.code == "foreign_checkpoint"
        assert "acme-0001" in {m.id for m in acme.models.list()}
        assert "acme-0001" not in {m.id for m in globex.models.list()}
        counted = serve.metrics()
        assert counted['rtrl_gateway_requests_refused_total{reason="foreign_checkpoint"}'] == 1

        # a newer checkpoint of the line: once the gateway has it, no answer from the old one
        acme_2 = register_variant(registry, "acme-0002", "acme-0001", seed=2, org_id="acme")
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, acme_2)
        _until(acme, "acme-0002")
        assert {_served_by(acme, f"u-{n}") for n in range(8)} == {"acme-0002"}

        # the shared line moves: acme's adapter grew on t-0000 and stops serving on t-0001
        shared = register_variant(registry, "t-0001", "t-0000", seed=3)
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, shared)
        _until(globex, "t-0001")
        _until(acme, "t-0001")
        # a line rebased on the new shared checkpoint serves again
        rebased = register_variant(registry, "acme-0003", "t-0001", seed=4, org_id="acme")
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, rebased)
        _until(acme, "acme-0003")
        assert _served_by(globex, "u-1") == "t-0001"
        with pytest.raises(openai.PermissionDeniedError):  # not served any more, still not theirs
            _served_by(globex, "u-1", model="acme-0001")
    finally:
        serve.stop()


def _arm(client: openai.OpenAI, user: str) -> tuple[str, str | None]:
    """The checkpoint that answered ``user``, and the experiment arm it was in (None: none)."""
    raw = client.chat.completions.with_raw_response.create(
        model="default", messages=ASK, max_tokens=2, extra_headers={"X-Rtrl-User-Id": user}
    )
    raw.parse()
    return raw.headers["x-rtrl-checkpoint-id"], raw.headers.get("x-rtrl-experiment")


def test_an_organisation_s_canary_splits_its_own_users_alone(
    tmp_path: Path, registry: CheckpointRegistry, kafka_bootstrap: str, topic_names
) -> None:
    """An organisation's candidate announced as a canary serves its share of that organisation's
    users (sticky, in experiment ``canary-<candidate>``), never another organisation's; rolled
    out, it serves all of them outside any experiment; the next one rolled back leaves them on
    the line as it was."""
    stage = {"canary": {"percent": 50.0}}
    acme_1 = register_variant(registry, "acme-0001", "t-0000", seed=1, org_id="acme",
                              status="canary", evals=stage)  # fmt: skip
    serve, acme, globex = _gateway(tmp_path, registry, kafka_bootstrap, topic_names)
    users = [f"u-{n}" for n in range(24)]
    try:
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, acme_1)
        deadline = time.monotonic() + 60
        while _arm(acme, "u-probe")[1] is None:
            assert time.monotonic() < deadline, "the canary never started"
            time.sleep(0.2)
        split = {u: _arm(acme, u) for u in users}
        assert {c for c, _ in split.values()} == {"t-0000", "acme-0001"}
        assert {e for _, e in split.values()} == {"canary-acme-0001:parent",
                                                  "canary-acme-0001:canary"}  # fmt: skip
        assert all(_arm(acme, u) == split[u] for u in users[:6])  # sticky
        assert {_arm(globex, u) for u in users} == {("t-0000", None)}  # never another org's

        registry.restage("acme-0001", "promoted")
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, registry.get("acme-0001"))
        _until(acme, "acme-0001")
        assert {_arm(acme, u) for u in users} == {("acme-0001", None)}

        acme_2 = register_variant(registry, "acme-0002", "acme-0001", seed=2, org_id="acme",
                                  status="canary", evals=stage)  # fmt: skip
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, acme_2)
        deadline = time.monotonic() + 60
        while "acme-0002" not in {_arm(acme, u)[0] for u in users}:
            assert time.monotonic() < deadline, "the second canary never started"
            time.sleep(0.2)
        assert {c for c, _ in (_arm(acme, u) for u in users)} == {"acme-0001", "acme-0002"}
        registry.restage("acme-0002", "rejected", ("rolled back: worse than its parent",))
        publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, registry.get("acme-0002"))
        deadline = time.monotonic() + 60
        while {_arm(acme, u) for u in users} != {("acme-0001", None)}:
            assert time.monotonic() < deadline, "the rejected canary went on serving"
            time.sleep(0.2)
        assert {_arm(globex, u) for u in users} == {("t-0000", None)}
    finally:
        serve.stop()


def test_an_experiment_can_split_one_organisation_s_users_alone(
    tmp_path: Path, registry: CheckpointRegistry, kafka_bootstrap: str, topic_names
) -> None:
    """``--experiment-org``: a fixed A/B split of one organisation's users; every other
    organisation is served as without it."""
    register_variant(registry, "t-0001", "t-0000", seed=3, status="rejected",
                     reasons=("an arm of the experiment, not promoted",))  # fmt: skip
    serve, acme, globex = _gateway(tmp_path, registry, kafka_bootstrap, topic_names,
                                   "--experiment", "exp-acme", "--arms",
                                   "control=current:50,treatment=t-0001:50",
                                   "--experiment-org", "acme")  # fmt: skip
    users = [f"u-{n}" for n in range(24)]
    try:
        split = {_arm(acme, u) for u in users}
        assert split == {("t-0000", "exp-acme:control"), ("t-0001", "exp-acme:treatment")}
        assert {_arm(globex, u) for u in users} == {("t-0000", None)}
    finally:
        serve.stop()
