"""`rtrl serve --spool-dir` with Kafka gone: the broker SIGKILLed under load, the gateway
SIGKILLed while the broker is down, the spool's bound reached. Every answered completion's
rollout reaches the topic exactly once (by interaction id) once Kafka is back, the spool's
counters say what happened, and what the bound refused is counted with its reason. On a
broker of this module's own, since it is killed and started again (never the session's)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import register_base
from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.settings import client
from infra.topics import TopicNames
from infra.topics_apply import apply_topics
from serving.rollouts.spool import RolloutSpool
from tests.support.gateway import Serve, api_key
from tests.support.kafka import drain, free_port_block

OUTAGE_S = 4.0
DELIVERED = "rtrl_gateway_rollouts_delivered_total"
WRITTEN = "rtrl_gateway_spool_written_total"
SEGMENTS = "rtrl_gateway_spool_segments"
SPOOLED = "rtrl_gateway_spool_rollouts"


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterLayout]:
    layout = ClusterLayout(tmp_path_factory.mktemp("kafka"), port=free_port_block(2), nodes=1)
    broker.start(layout, default_cache_root(os.environ))
    try:
        yield layout
    finally:
        broker.stop(layout)


def restart(layout: ClusterLayout) -> None:
    broker.start(layout, default_cache_root(os.environ))


class Gateway:
    """`rtrl serve` on the tiny model with a disk spool in ``tmp``, and its API key."""

    def __init__(self, tmp: Path, tiny_model: Path, bootstrap: str, prefix: str,
                 *extra: str) -> None:  # fmt: skip
        registry = CheckpointRegistry(tmp / "ckpt")
        if registry.current() is None:
            register_base(registry, "t-0000", tiny_model)
        self.key = api_key(tmp / "keys.sqlite")
        self.spool = tmp / "spool"
        self.args = ["--registry", str(registry.root), "--key-db", str(tmp / "keys.sqlite"),
                     "--bootstrap", bootstrap, "--topic-prefix", prefix, "--no-follow",
                     "--max-tokens", "3", "--spool-dir", str(self.spool), *extra]  # fmt: skip
        self.log = tmp / "serve.log"

    def start(self) -> Serve:
        return Serve(self.args, self.log)

    def ask(self, serve: Serve, interaction: str) -> int:
        answer = httpx.post(
            f"{serve.url}/v1/completions",
            json={"model": "default", "prompt": "def mean("},
            headers={"Authorization": f"Bearer {self.key}", "X-Rtrl-Interaction-Id": interaction},
            timeout=30,
        )
        return answer.status_code


class Load(threading.Thread):
    """Completions one after another, each under a new interaction id tagged with the phase it
    was sent in; keeps the ids of those answered 200."""

    def __init__(self, gateway: Gateway, serve: Serve) -> None:
        super().__init__(daemon=True)
        self.gateway, self.serve = gateway, serve
        self.phase = "before"
        self.answered: list[str] = []
        self.failed: list[int] = []
        self._stop_now = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop_now.is_set():
            interaction = f"{self.phase}-{n}"
            n += 1
            status = self.gateway.ask(self.serve, interaction)
            (self.answered.append(interaction) if status == 200 else self.failed.append(status))

    def stop(self) -> list[str]:
        self._stop_now.set()
        self.join(60)
        return self.answered

    def count(self, phase: str) -> int:
        return sum(1 for i in self.answered if i.startswith(f"{phase}-"))


def wait_for(serve: Serve, name: str, ok, timeout_s: float = 60) -> dict[str, float]:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while True:
        counts = serve.metrics()
        if ok(counts.get(name, 0.0)):
            return counts
        assert time.monotonic() < deadline, (
            f"{name}={counts.get(name)}: {serve.log.read_text()[-2000:]}"
        )
        time.sleep(0.2)


def on_topic(bootstrap: str, topic: str) -> Counter[str]:
    """Messages per key on ``topic``, every one of them: as many as its partitions' offsets
    say it holds."""
    consumer = Consumer(client(bootstrap, **{"group.id": f"count-{uuid.uuid4().hex}"}))
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        held = 0
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            held += high - low
    finally:
        consumer.close()
    got = Counter(m.key().decode() for m in drain(bootstrap, topic, held, timeout=60))
    assert sum(got.values()) == held
    return got


def test_broker_killed_under_load_every_answered_rollout_arrives_once(
        own_broker: ClusterLayout, tmp_path: Path, tiny_model: Path) -> None:  # fmt: skip
    names = TopicNames(f"o{uuid.uuid4().hex[:8]}.")
    apply_topics(own_broker.bootstrap, names, replication=1)
    gateway = Gateway(tmp_path, tiny_model, own_broker.bootstrap, names.prefix)
    serve = gateway.start()
    load = Load(gateway, serve)
    try:
        load.start()
        wait_for(serve, DELIVERED, lambda n: n >= 10)
        broker.kill_node(own_broker, 0)  # SIGKILL: produce requests in flight are cut off
        load.phase = "during"
        time.sleep(OUTAGE_S)
        during = load.count("during")
        assert during >= 5, f"answers stalled while Kafka was down: {during} in {OUTAGE_S} s"
        # the last answers' rollouts are built on the recorder's next hand-over: wait for it
        counts = wait_for(serve, SPOOLED, lambda n: n >= during)  # waiting, in memory and on disk
        assert counts[WRITTEN] >= 10 + during
        assert counts["rtrl_gateway_spool_disk_bytes"] > 0
        restart(own_broker)
        load.phase = "after"
        time.sleep(1.0)
        answered = load.stop()
        assert load.failed == []
        wait_for(serve, DELIVERED, lambda n: n >= len(answered))
        counts = wait_for(serve, SEGMENTS, lambda n: n == 0, timeout_s=10)  # all deleted
        assert counts["rtrl_gateway_spool_rollouts"] == 0
        assert counts[DELIVERED] == len(answered)
        assert not any(k.startswith("rtrl_gateway_rollouts_dropped_total") for k in counts)
        assert serve.stop() == 0
        got = on_topic(own_broker.bootstrap, names.rollouts)
        assert set(got) == set(answered) and set(got.values()) == {1}, "lost or duplicated"
    finally:
        load.stop()
        serve.stop()
        restart(own_broker)  # for the next test, whatever happened here


def test_gateway_killed_while_kafka_is_down_delivers_its_spool_after_restart(
        kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path,
        tiny_model: Path) -> None:  # fmt: skip
    """Kafka unreachable for the first gateway (nothing listens at its bootstrap), which is
    SIGKILLed with its rollouts spooled; the next start, with a reachable broker (the session's:
    never stopped here), finds them and delivers each once."""
    down = f"127.0.0.1:{free_port_block(1)}"
    gateway = Gateway(tmp_path, tiny_model, down, topic_names.prefix)
    first = gateway.start()
    second = None
    try:
        for n in range(8):
            assert gateway.ask(first, f"during-{n}") == 200
        wait_for(first, WRITTEN, lambda n: n >= 8)  # on disk: the kill may come now
        first.proc.kill()
        assert first.stop() == -9
        folder = gateway.spool / topic_names.rollouts
        assert list(folder.glob("*.seg"))
        again = Gateway(tmp_path, tiny_model, kafka_bootstrap, topic_names.prefix)
        second = again.start()
        counts = second.metrics_when("rtrl_gateway_spool_recovered_total", 8)
        assert counts["rtrl_gateway_spool_recovered_total"] == 8
        assert again.ask(second, "after-0") == 200
        wait_for(second, DELIVERED, lambda n: n >= 9)
        wait_for(second, SEGMENTS, lambda n: n == 0, timeout_s=10)
        assert second.stop() == 0
        second = None
        got = on_topic(kafka_bootstrap, topic_names.rollouts)
        assert set(got) == {f"during-{n}" for n in range(8)} | {"after-0"}
        assert set(got.values()) == {1}, "duplicated"
        assert list(folder.glob("*.seg")) == []
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_full_spool_refuses_with_its_reason_and_keeps_what_it_took(
        tmp_path: Path, tiny_model: Path) -> None:  # fmt: skip
    """No broker at all (nothing listens at the bootstrap): the spool fills. Its bound in bytes
    holds on disk, and every rollout it refused is counted under ``spool_bytes_full``."""
    bound = 4000  # a few of the tiny model's rollouts
    nowhere = f"127.0.0.1:{free_port_block(1)}"
    gateway = Gateway(tmp_path, tiny_model, nowhere, "full.", "--spool-max-bytes", str(bound))
    serve = gateway.start()
    try:
        sent = [f"full-{n}" for n in range(12)]
        for interaction in sent:
            assert gateway.ask(serve, interaction) == 200  # a full spool never fails an answer
        counts: dict[str, float] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # each answer's rollout is spooled or refused
            counts = serve.metrics()
            outcomes = [counts.get(f'rtrl_gateway_rollouts_total{{outcome="{o}"}}', 0)
                        for o in ("recorded", "dropped")]  # fmt: skip
            if sum(outcomes) == len(sent):
                break
            time.sleep(0.1)
        kept = counts["rtrl_gateway_spool_rollouts"]
        dropped = counts['rtrl_gateway_rollouts_dropped_total{reason="spool_bytes_full"}']
        assert kept >= 1 and dropped >= 1 and kept + dropped == len(sent)
        assert counts["rtrl_gateway_spool_bytes"] <= bound
        assert "rollouts dropped, 1 so far ({'spool_bytes_full': 1})" in serve.log.read_text()
        wait_for(serve, WRITTEN, lambda n: n >= kept)
        serve.proc.kill()
    finally:
        serve.stop()
    spool = RolloutSpool(gateway.spool / "full.rollouts")  # what the next start would deliver
    found = spool.recover()
    spool.close()
    assert [key.decode() for key, _, _ in found] == sent[: int(kept)]  # the first, in order
    assert sum(len(value) for _, value, _ in found) <= bound
