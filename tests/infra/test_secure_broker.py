"""The platform on a secured broker (`rtrl broker start --secure`): SASL_SSL only, a SCRAM user
and a client certificate per service, ACLs.

Every service runs as its own process with its own settings file (``RTRL_KAFKA_CONFIG``): the
collector takes events in, the stream worker joins them into rewards, the sink lands them, the
batch builder reads and announces batches, the trainer registers and announces a checkpoint and
reads the batches, and the serving gateway follows checkpoints and records a completion on
``rollouts``. A client without credentials is refused, and so is the collector's identity where
it has no business: it can neither read ``rewards`` nor write ``checkpoints``, and the sink run
with it says so in one sentence (as does a collector run with an identity that may not write
``telemetry.events``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from infra import broker
from infra.api_keys import KeyStore
from infra.broker_config import ClusterLayout
from infra.compacted import read_latest
from infra.kafka_dist import default_cache_root
from infra.kafka_errors import refusal_sentence
from infra.kafka_security import CONFIG_ENV, ENV_FIELDS, KafkaSecurity, read_security_file
from infra.settings import admin, manual_commit_consumer, reliable_producer
from infra.topics import TopicNames
from infra.topics_apply import apply_topics
from tests.support.collector import ORG, valid_event
from tests.support.kafka import free_port_block

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
NAMES = TopicNames()


@dataclass(frozen=True)
class Secured:
    layout: ClusterLayout
    bootstrap: str

    def file(self, user: str) -> Path:
        return self.layout.secure_dir / f"{user}.toml"

    def security(self, user: str) -> KafkaSecurity:
        return KafkaSecurity(**read_security_file(self.file(user)))

    def env(self, user: str) -> dict[str, str]:
        """This process's environment with ``user``'s identity and no other."""
        env = {k: v for k, v in os.environ.items() if k not in ENV_FIELDS}
        return {**env, CONFIG_ENV: str(self.file(user)), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    layout = ClusterLayout(
        tmp_path_factory.mktemp("secure-kafka"), port=free_port_block(2), secure=True
    )
    bootstrap = broker.start(layout, default_cache_root(os.environ))
    try:
        found = Secured(layout, bootstrap)
        apply_topics(bootstrap, NAMES, replication=1, security=found.security("admin"))
        yield found
    finally:
        broker.stop(layout)


def rtrl(secured: Secured, user: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rtrl.cli", *args, "--bootstrap", secured.bootstrap],
        cwd=REPO,
        env=secured.env(user),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def read_all(secured: Secured, topic: str, expected: int, timeout: float = 90) -> list:
    """``topic``'s messages, read as the admin (the tests' own eyes, not a service's)."""
    consumer = Consumer(
        manual_commit_consumer(secured.bootstrap, f"t-{time.time_ns()}", secured.security("admin"))
    )
    consumer.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    return got


def test_a_client_without_credentials_is_refused(secured: Secured) -> None:
    # plaintext to the SASL_SSL port: no TLS, no SASL
    with pytest.raises(KafkaException):
        AdminClient(admin(secured.bootstrap, KafkaSecurity())).list_topics(timeout=5)
    sink = secured.security("sink")
    # the right TLS files, a wrong password
    wrong = sink.model_copy(update={"password": SecretStr("not-the-password")})
    with pytest.raises(KafkaException):
        AdminClient(admin(secured.bootstrap, wrong)).list_topics(timeout=5)
    # the right password without a client certificate: mutual TLS refuses the handshake
    no_cert = sink.model_copy(update={"cert_file": None, "key_file": None})
    with pytest.raises(KafkaException):
        AdminClient(admin(secured.bootstrap, no_cert)).list_topics(timeout=5)
    # and with everything, the same user is let in
    assert AdminClient(admin(secured.bootstrap, sink)).list_topics(timeout=10).brokers


def _post_when_up(url: str, key: str, events: list) -> httpx.Response:
    """POST once the collector at ``url`` answers at all (``/livez``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/livez", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    return httpx.post(
        f"{url}/v1/events",
        json={"events": events},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_every_service_runs_with_its_own_credentials(secured: Secured, tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite")
    key = keys.create(ORG)
    keys.close()
    port = free_port_block(1)
    reward = tmp_path / "reward.json"
    reward.write_text(
        json.dumps({"window_s": 2, "late_s": 1, "grace_s": 1, "remember_closed_s": 3600})
    )
    collector = rtrl(
        secured,
        "collector",
        "collector",
        "--port",
        str(port),
        "--key-db",
        str(tmp_path / "keys.sqlite"),
    )
    stream = rtrl(
        secured,
        "stream",
        "stream",
        "worker",
        "--no-supervisor",
        "--store",
        "memory",
        "--data-dir",
        str(tmp_path / "stream"),
        "--reward-config",
        str(reward),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        events = [valid_event() for _ in range(5)]
        answer = httpx.post(
            f"{url}/v1/events",
            json={"events": events},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json()["accepted"] == 5, answer.text
        # telemetry.events -> stream worker (its own user) -> rewards
        rewards = read_all(secured, NAMES.rewards, expected=5)
        assert {orjson.loads(m.value())["interaction_id"] for m in rewards} == {
            e["interaction_id"] for e in events
        }
    finally:
        for proc in (collector, stream):
            proc.terminate()
        stream_code, _, stream_err = finish(stream, 60)
        finish(collector, 60)
    assert stream_code == 0, stream_err[-2000:]

    # the sink lands them with its own user
    root = tmp_path / "warehouse"
    code, out, err = finish(
        rtrl(secured, "sink", "warehouse", "sink", "--warehouse", str(root), "--once")
    )
    assert code == 0, err[-2000:]
    assert list((root / "rewards").rglob("*.parquet")), out
    # the batch builder reads (and would announce on) batches with its own
    code, out, err = finish(rtrl(secured, "batches", "batches", "build", "--warehouse", str(root)))
    assert code == 0, err[-2000:]

    # the trainer registers the first checkpoint and announces it, with its own user
    registry = tmp_path / "checkpoints"
    code, out, err = finish(
        rtrl(
            secured,
            "trainer",
            "checkpoints",
            "init",
            "--registry",
            str(registry),
            "--id",
            "tiny-secure",
            "--model",
            "tiny",
            "--publish",
        ),
        300,
    )
    assert code == 0, err[-2000:]
    assert set(_read_latest_as(secured, "admin", NAMES.checkpoints)) == {b"tiny-secure"}
    # ... and reads the offered batches as trainer.inputs does
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from infra.compacted import "
            "read_latest; read_latest(sys.argv[1], 'batches')",
            secured.bootstrap,
        ],
        cwd=REPO,
        env=secured.env("trainer"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the serving side follows checkpoints and records a completion on rollouts, with its own
    port = free_port_block(1)
    serving = rtrl(
        secured,
        "serving",
        "serve",
        "--port",
        str(port),
        "--registry",
        str(registry),
        "--key-db",
        str(tmp_path / "keys.sqlite"),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        chat = httpx.post(
            f"{url}/v1/chat/completions",
            timeout=60,
            headers={"Authorization": f"Bearer {key}"},
            json={
                "model": "default",
                "max_tokens": 4,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        assert chat.status_code == 200, chat.text
        assert len(read_all(secured, NAMES.rollouts, expected=1)) == 1
    finally:
        serving.terminate()
        finish(serving, 60)


def _read_latest_as(secured: Secured, user: str, topic: str) -> dict[bytes, bytes]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, json; from infra.compacted import read_latest; "
            "print(json.dumps({k.decode(): v.decode() for k, v in "
            "read_latest(sys.argv[1], sys.argv[2]).items()}))",
            secured.bootstrap,
            topic,
        ],
        cwd=REPO,
        env=secured.env(user),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {k.encode(): v.encode() for k, v in json.loads(done.stdout).items()}


def test_the_collector_can_neither_read_rewards_nor_write_checkpoints(
    secured: Secured, tmp_path: Path
) -> None:
    collector = secured.security("collector")
    # reading rewards: the topic's metadata comes back refused
    with pytest.raises(KafkaException) as refusal:
        read_latest(secured.bootstrap, NAMES.rewards, 20, collector)
    assert refusal.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # writing checkpoints: the broker refuses the record
    refused: list[KafkaError] = []

    def note(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            refused.append(err)

    producer = Producer(
        reliable_producer(secured.bootstrap, collector, **{"message.timeout.ms": 10_000})
    )
    producer.produce(NAMES.checkpoints, key=b"ckpt-evil", value=b"{}", on_delivery=note)
    producer.flush(15)
    del producer  # closed now, not after the module's broker is gone
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert refusal_sentence(refused[0].code(), collector, "write", NAMES.checkpoints) == (
        "Kafka refuses user 'collector' to write topic checkpoints: no ACL allows it."
    )
    # a collector run with another service's identity (one that may write other topics)
    # answers 503 with the refusal's sentence
    keys = KeyStore(tmp_path / "keys.sqlite")
    key = keys.create(ORG)
    keys.close()
    port = free_port_block(1)
    wrong_collector = rtrl(
        secured,
        "stream",
        "collector",
        "--port",
        str(port),
        "--key-db",
        str(tmp_path / "keys.sqlite"),
        "--delivery-timeout",
        "5",
    )
    try:
        answer = _post_when_up(f"http://127.0.0.1:{port}", key, [valid_event()])
    finally:
        wrong_collector.terminate()
        finish(wrong_collector, 30)
    assert answer.status_code == 503
    assert answer.json()["detail"] == (
        "Kafka refuses user 'stream' to write topic telemetry.events: no ACL allows it."
    )
    # a service run with the collector's identity says so in one sentence and stops
    code, _, err = finish(
        rtrl(
            secured, "collector", "warehouse", "sink", "--warehouse", str(tmp_path / "wh"), "--once"
        ),
        60,
    )
    last = err.strip().splitlines()[-1]
    assert code == 1
    assert last.startswith("rtrl warehouse sink: Kafka refuses user 'collector' to read "), err
    assert last.endswith(": no ACL allows it."), err
    # and so does the trainer's announcing, run with the collector's identity
    code, _, err = finish(
        rtrl(
            secured,
            "collector",
            "checkpoints",
            "announce",
            "--registry",
            str(tmp_path / "no-registry"),
        ),
        60,
    )
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        "rtrl checkpoints: Kafka refuses user 'collector' to read topic "
        f"{NAMES.checkpoints}: no ACL allows it."
    ), err


def test_a_stream_worker_without_its_rights_says_so(secured: Secured, tmp_path: Path) -> None:
    code, _, err = finish(
        rtrl(
            secured,
            "batches",
            "stream",
            "worker",
            "--no-supervisor",
            "--store",
            "memory",
            "--data-dir",
            str(tmp_path / "s"),
        ),
        90,
    )
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "rtrl stream worker: Kafka refuses user 'batches' "
        "to read topic telemetry.events: no ACL allows it."
    )
