"""`rtrl otel export` against a real OTLP/HTTP logs receiver, on the real test broker: what
arrives, the retries, and the crash guarantee (no commit before the endpoint accepted; a
restart delivers again)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson
from confluent_kafka import Consumer, TopicPartition

from infra.settings import manual_commit_consumer
from infra.topics import JOIN_PARTITIONS, TopicNames
from otel.exporter import Exporter
from otel.otlp_logs import plain
from otel.settings import ExportSettings, parse_headers
from tests.support.kafka import produce_raw
from tests.support.otel import REPO, LogsReceiver, reward


def publish(bootstrap: str, topic: str, values: list[tuple[str, bytes | None]]) -> None:
    produce_raw(bootstrap, topic, [(k.encode(), v, None) for k, v in values])


def record_bytes(interaction_id: str, **overrides: object) -> bytes:
    return orjson.dumps(reward(interaction_id, **overrides).to_json_dict())


def committed(bootstrap: str, topic: str, group: str) -> int:
    """How many records of ``topic`` the group has committed, over every partition."""
    c = Consumer(manual_commit_consumer(bootstrap, group))  # asks only, never joins
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(JOIN_PARTITIONS)],
                            timeout=10)  # fmt: skip
    finally:
        c.close()
    return sum(max(tp.offset, 0) for tp in parts)


def settings(
    bootstrap: str, names: TopicNames, receiver: LogsReceiver, **kw: object
) -> ExportSettings:
    values: dict[str, object] = dict(
        bootstrap=bootstrap, topics=names, endpoint=receiver.url, group_id="otel-test",
        once=True, once_idle_s=1.0, max_wait_s=0.2, retry_initial_s=0.05, retry_max_s=0.2,
    )  # fmt: skip
    values.update(kw)
    return ExportSettings(**values)  # type: ignore[arg-type]


def by_response(receiver: LogsReceiver) -> dict[str, dict[str, object]]:
    """Each received record's attributes, by its gen_ai.response.id."""
    out: dict[str, dict[str, object]] = {}
    for record in receiver.records():
        attrs: dict[str, object] = {kv.key: plain(kv.value) for kv in record.attributes}
        out[str(attrs["gen_ai.response.id"])] = attrs
    return out


def test_each_reward_arrives_once_with_its_attributes_and_the_rest_is_counted(
    kafka_bootstrap: str, topic_names: TopicNames, logs_receiver: LogsReceiver
) -> None:
    private = reward("p-1", status="censored", censor_reason="privacy_mode", reward=None,
                     user_id=None, dissatisfied=None)  # fmt: skip
    publish(kafka_bootstrap, topic_names.rewards, [
        ("chatcmpl-a", record_bytes("chatcmpl-a")),
        ("chatcmpl-b", record_bytes("chatcmpl-b", reward=-0.6, r_edit=-0.5)),
        ("p-1", orjson.dumps(private.to_json_dict())),
        ("gone", None),
        ("bad", b'{"interaction_id": "bad"}'),
    ])  # fmt: skip
    logs_receiver.fail_next = 2  # the endpoint is busy twice: retried, not lost
    s = settings(kafka_bootstrap, topic_names, logs_receiver,
                 headers=parse_headers(["x-api-key=k-123"]))  # fmt: skip
    stats = Exporter(s).run()

    got = by_response(logs_receiver)
    assert sorted(got) == ["chatcmpl-a", "chatcmpl-b"]
    assert len(logs_receiver.records()) == 2  # each once
    assert got["chatcmpl-b"]["gen_ai.evaluation.score.value"] == -0.6
    assert got["chatcmpl-b"]["gen_ai.evaluation.score.label"] == "negative"
    assert got["chatcmpl-a"]["gen_ai.evaluation.name"] == "rtrl.reward"
    assert str(got["chatcmpl-a"]["gen_ai.evaluation.explanation"]).startswith(
        "reward 0.65 = r_edit 0.75 + r_followup 0 + r_tool 0 + r_clarify 0 + r_latency -0.1"
    )
    assert all(h["x-api-key"] == "k-123" for h in logs_receiver.headers)
    assert (stats.read, stats.delivered, stats.retries) == (5, 2, 2)
    assert stats.passed == {"privacy_mode": 1, "tombstone": 1, "malformed": 1}
    assert committed(kafka_bootstrap, topic_names.rewards, "otel-test") == 5


def test_nothing_is_committed_before_the_endpoint_accepted_and_a_restart_delivers_again(
    kafka_bootstrap: str, topic_names: TopicNames, logs_receiver: LogsReceiver
) -> None:
    ids = [f"chatcmpl-{i}" for i in range(3)]
    publish(kafka_bootstrap, topic_names.rewards, [(i, record_bytes(i)) for i in ids])
    logs_receiver.hold.set()  # the endpoint takes the request and does not answer
    cmd = [sys.executable, "-m", "rtrl.cli", "otel", "export", "--bootstrap", kafka_bootstrap,
           "--topic-prefix", topic_names.prefix, "--endpoint", logs_receiver.url,
           "--group-id", "otel-crash", "--max-wait-s", "0.2",
           "--session-timeout-ms", "6000"]  # fmt: skip
    exporter = subprocess.Popen(cmd, cwd=REPO, env=os.environ.copy(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not logs_receiver.seen:
            assert exporter.poll() is None, exporter.stderr.read() if exporter.stderr else ""
            assert time.monotonic() < deadline, "the exporter sent nothing in 60 s"
            time.sleep(0.1)
        time.sleep(0.5)  # time enough to commit, were it to commit before the answer
        assert committed(kafka_bootstrap, topic_names.rewards, "otel-crash") == 0
        exporter.send_signal(signal.SIGKILL)
        exporter.wait(timeout=10)
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()
    logs_receiver.hold.clear()
    time.sleep(0.2)  # the held request is answered to nobody
    with logs_receiver.lock:
        logs_receiver.accepted.clear()

    restarted = subprocess.run([*cmd, "--once", "--once-idle-s", "1"], cwd=REPO,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
    assert restarted.returncode == 0, restarted.stderr
    assert sorted(by_response(logs_receiver)) == ids
    assert committed(kafka_bootstrap, topic_names.rewards, "otel-crash") == 3
    assert "3 rewards read, 3 delivered" in restarted.stdout


def test_a_refusal_no_retry_mends_stops_the_exporter_without_committing(
    kafka_bootstrap: str, topic_names: TopicNames, logs_receiver: LogsReceiver
) -> None:
    publish(kafka_bootstrap, topic_names.rewards, [("chatcmpl-x", record_bytes("chatcmpl-x"))])
    wrong = subprocess.run(
        [sys.executable, "-m", "rtrl.cli", "otel", "export", "--bootstrap", kafka_bootstrap,
         "--topic-prefix", topic_names.prefix, "--endpoint", logs_receiver.url + "/v1/nope",
         "--group-id", "otel-refused", "--once", "--once-idle-s", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert wrong.returncode == 1
    assert "refused the batch with 404" in wrong.stderr
    assert committed(kafka_bootstrap, topic_names.rewards, "otel-refused") == 0
