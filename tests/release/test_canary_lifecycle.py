"""A canary's whole life on a real gateway: announced, it serves its share of users as the arm
``canary`` of its experiment; its users' rewards (the project's reward function over the events
they would send, stamped with the experiment the gateway returned) land in the warehouse;
`rtrl canary decide --publish` judges the live A/B and announces the outcome, and the gateway
follows it. A worse canary is rolled back (everyone back on the parent, no experiment); one that
is not worse is rolled out (everyone on it)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import openai
import orjson

from checkpoints.publish import publish_checkpoint
from checkpoints.record import CANARY, PROMOTED, REJECTED
from infra.topics import TopicNames
from release.canary_config import CanaryConfig, canary_stage
from rewards.config import RewardConfig
from rewards.function import compute_record
from tests.support.checkpoints import register_variant
from tests.support.events import events_of
from tests.support.gateway import Serve, api_key
from tests.support.warehouse import land
from warehouse.catalog import build_catalog
from warehouse.store import Store

REPO = Path(__file__).resolve().parents[2]
ASK: list = [{"role": "user", "content": "Write `slugify(s)` in Python."}]
PERCENT = 30
PER_USER = 10  # interactions of each served user


def serve_users(client: openai.OpenAI, users: list[str],
                round_tag: str) -> list[tuple[str, str, str, str | None]]:  # fmt: skip
    """One completion per user: (interaction, user, checkpoint, experiment header)."""
    served = []
    for user in users:
        interaction = f"{round_tag}-{user}"
        raw = client.chat.completions.with_raw_response.create(
            model="default",
            messages=ASK,
            extra_headers={"X-Rtrl-User-Id": user, "X-Rtrl-Interaction-Id": interaction},
        )
        raw.parse()
        served.append(
            (
                interaction,
                user,
                raw.headers["x-rtrl-checkpoint-id"],
                raw.headers.get("x-rtrl-experiment"),
            )
        )
    return served


def wait_for(client: openai.OpenAI, check, what: str, timeout_s: float = 90) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check(serve_users(client, [f"probe-{n}" for n in range(10)], f"w{time.time_ns()}")):
            return
        time.sleep(0.5)
    raise AssertionError(f"the gateway never {what}")


def decide(registry, catalog: str, bootstrap: str, prefix: str) -> list[dict]:  # noqa: ANN001
    done = subprocess.run(
        [sys.executable, "-m", "rtrl.cli", "canary", "decide", "--registry", str(registry.root),
         "--catalog", catalog, "--json", "--publish", "--bootstrap", bootstrap,
         "--topic-prefix", prefix],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def run_canary(tmp: Path, registry, client, bootstrap: str, prefix: str, candidate: str,  # noqa: ANN001
               canary_accept: float, seed: int) -> list[dict]:  # fmt: skip
    """Announce ``candidate`` as a canary, serve 160 users, land the rewards of their
    ``PER_USER`` interactions each (the first served through the gateway, which says the
    user's arm; users, not interactions, are the canary's unit), decide."""
    # the interactions' times are fixed in the past (their users' windows have closed); the
    # canary itself started a moment ago, so its minimum exposure is waived here
    config = CanaryConfig(percent=PERCENT, min_users=20, margin=0.3, tuning_users=160,
                          min_exposure_hours=0)  # fmt: skip
    info = register_variant(registry, candidate, "t-0000", seed=seed, status=CANARY,
                            evals={"canary": canary_stage(candidate, config)})  # fmt: skip
    publish_checkpoint(bootstrap, TopicNames(prefix).checkpoints, info)
    wait_for(client, lambda got: any(c == candidate for _, _, c, _ in got), "started the canary")
    served = serve_users(client, [f"u{seed}-{n:03d}" for n in range(160)], candidate)
    experiment = f"canary-{candidate}"
    arms = {user: exp for _, user, _, exp in served}
    canary_users = [u for u, exp in arms.items() if exp == f"{experiment}:canary"]
    assert all(exp in (f"{experiment}:canary", f"{experiment}:parent") for exp in arms.values())
    assert abs(len(canary_users) / len(served) - PERCENT / 100) < 0.1
    assert all(c == (candidate if arms[user] == f"{experiment}:canary" else "t-0000")
               for _, user, c, _ in served)  # fmt: skip
    rng = random.Random(seed)
    records = []
    for n, (interaction, user, checkpoint, exp) in enumerate(served):
        accept = canary_accept if user in canary_users else 0.6
        for k in range(PER_USER):
            events = events_of(f"{interaction}-{k}", user, checkpoint, exp,
                               rng.random() < accept, n * PER_USER + k)  # fmt: skip
            records.append(compute_record(events, RewardConfig()).to_json_dict())
    store = Store(str(tmp / f"warehouse-{candidate}"))
    land(store, "rewards", records)
    return decide(registry, build_catalog(store), bootstrap, prefix)


def evaluate(registry, checkpoint: str) -> dict:  # noqa: ANN001
    """`rtrl canary evaluate --checkpoint`: the course re-run from the stored evidence."""
    done = subprocess.run(
        [sys.executable, "-m", "rtrl.cli", "canary", "evaluate", "--registry",
         str(registry.root), "--checkpoint", checkpoint, "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    (line,) = done.stdout.splitlines()
    return orjson.loads(line)


def test_a_worse_canary_is_rolled_back_and_a_better_one_rolled_out(tmp_path, registry,
                                                                    kafka_bootstrap,
                                                                    topic_names):  # fmt: skip
    root = registry.get("t-0000")
    publish_checkpoint(kafka_bootstrap, topic_names.checkpoints, root)
    key = api_key(tmp_path / "keys.sqlite")
    serve = Serve(
        ["--registry", str(registry.root), "--checkpoint", "t-0000", "--key-db",
         str(tmp_path / "keys.sqlite"), "--bootstrap", kafka_bootstrap, "--topic-prefix",
         topic_names.prefix, "--max-tokens", "2"],
        tmp_path / "serve.log",
    )  # fmt: skip
    client = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0)
    try:
        worse = run_canary(tmp_path, registry, client, kafka_bootstrap, topic_names.prefix,
                           "t-0001", canary_accept=0.15, seed=1)  # fmt: skip
        assert [v["verdict"] for v in worse] == ["rollback"]
        assert any("live reward worse" in r for r in worse[0]["reasons"])
        info = registry.get("t-0001")
        assert info.status == REJECTED and info.evals["canary"]["outcome"] == "rolled_back"
        rerun = evaluate(registry, "t-0001")  # the decision re-run from its evidence
        assert (rerun["decision"], rerun["looks"], rerun["reproduced"]) == ("rollback", 1, True)
        assert all(r.startswith("canary rolled back: ") for r in info.reasons)
        wait_for(
            client,
            lambda got: all(c == "t-0000" and e is None for _, _, c, e in got),
            "ended the rolled-back canary",
        )

        same = run_canary(tmp_path, registry, client, kafka_bootstrap, topic_names.prefix,
                          "t-0002", canary_accept=0.6, seed=2)  # fmt: skip
        assert [(v["verdict"], v["reasons"]) for v in same] == [("rollout", [])]
        info = registry.get("t-0002")
        assert info.status == PROMOTED and info.evals["canary"]["outcome"] == "rolled_out"
        rerun = evaluate(registry, "t-0002")
        assert (rerun["decision"], rerun["looks"], rerun["reproduced"]) == ("rollout", 1, True)
        assert [s["stage"] for s in info.evals["stages"]] == [PROMOTED]
        wait_for(
            client,
            lambda got: all(c == "t-0002" and e is None for _, _, c, e in got),
            "rolled the canary out to everyone",
        )
        assert (
            decide(
                registry,
                str(tmp_path / "warehouse-t-0002" / "warehouse.duckdb"),
                kafka_bootstrap,
                topic_names.prefix,
            )
            == []
        )  # nothing left to judge
    finally:
        serve.stop()
