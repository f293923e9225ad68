"""The collector on the real broker: auth, tenants, limits, delivery guarantees, endpoints."""

from __future__ import annotations

import gzip
import signal
import time
from pathlib import Path

import httpx
import orjson
import pytest

from infra.topics import TopicNames
from rtrl.cli import main as rtrl_main
from tests.support.collector import (
    ORG,
    OTHER_ORG,
    CollectorHandle,
    CollectorProcess,
    drain_events,
    make_collector,
    valid_event,
)
from tests.support.kafka import free_port_block


def test_missing_or_unknown_key_gets_401(collector: CollectorHandle) -> None:
    url = f"{collector.url}/v1/events"
    body = {"events": [valid_event()]}
    for headers in (
        {},
        {"Authorization": "Bearer rtrl_unknown"},
        {"Authorization": f"Basic {collector.key}"},
    ):
        answer = httpx.post(url, json=body, headers=headers)
        assert answer.status_code == 401, headers
        assert answer.json()["reason"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"] == "Bearer"


def test_cross_tenant_event_is_rejected_alone(
    collector: CollectorHandle, kafka_bootstrap: str
) -> None:
    events = [valid_event(), valid_event(org_id=OTHER_ORG), valid_event()]
    answer = collector.post(events)
    assert answer.status_code == 200
    body = answer.json()
    assert (body["accepted"], body["rejected"]) == (2, 1)
    assert body["results"][1] == {
        "index": 1,
        "event_id": events[1]["event_id"],
        "accepted": False,
        "status": 403,
        "reason": "tenant_mismatch",
        "field": "org_id",
        "detail": "org_id differs from the API key's tenant",
    }
    # The other tenant's own key may send it.
    assert collector.post([events[1]], key=collector.other_key).json()["accepted"] == 1

    written = drain_events(kafka_bootstrap, collector.names.events, expected=3)
    assert sorted(e["event_id"] for e in written) == sorted(e["event_id"] for e in events)
    assert all(e["received_at"].endswith("Z") and len(e["received_at"]) == 27 for e in written)
    dlq = drain_events(kafka_bootstrap, collector.names.dlq, expected=1)
    assert dlq[0]["reason"] == "tenant_mismatch" and dlq[0]["org_id"] == ORG
    assert dlq[0]["raw"] == events[1]


def test_rate_limit_per_key_answers_429(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> None:
    handle = make_collector(
        kafka_bootstrap, topic_names, tmp_path, rate_per_key=0.5, burst_per_key=3
    )
    try:
        statuses = [handle.post([]).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = handle.post([])
        assert limited.json()["reason"] == "rate_limited"
        assert int(limited.headers["Retry-After"]) >= 1
        assert handle.post([], key=handle.other_key).status_code == 200  # another key is free
    finally:
        handle.running.stop()


def test_size_limits_and_encodings(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> None:
    handle = make_collector(
        kafka_bootstrap, topic_names, tmp_path, max_body_bytes=20_000, max_events_per_batch=10
    )
    headers = {"Authorization": f"Bearer {handle.key}"}
    url = f"{handle.url}/v1/events"
    try:
        too_many = handle.post([valid_event() for _ in range(11)])
        assert (too_many.status_code, too_many.json()["reason"]) == (413, "too_many_events")
        big = httpx.post(url, content=b" " * 30_000, headers=headers)
        assert (big.status_code, big.json()["reason"]) == (413, "body_too_large")
        zipped = gzip.compress(orjson.dumps({"events": [valid_event() for _ in range(10)]}))
        ok = httpx.post(url, content=zipped, headers={**headers, "Content-Encoding": "gzip"})
        assert ok.status_code == 200 and ok.json()["accepted"] == 10
        assert httpx.post(url, content=b"{", headers=headers).json()["reason"] == "not_json"
    finally:
        handle.running.stop()


def test_probes_metrics_on_their_own_port_and_openapi(collector: CollectorHandle) -> None:
    assert httpx.get(f"{collector.url}/livez").json() == {"status": "alive"}
    ready = {"status": "ready", "kafka": "reachable"}
    assert httpx.get(f"{collector.url}/readyz").json() == ready
    assert httpx.get(f"{collector.url}/health").json() == ready  # the former name
    collector.post([valid_event(), {"bad": True}])
    assert httpx.get(f"{collector.url}/metrics").status_code == 404  # not on the public port
    assert collector.running.metrics_url is not None
    metrics = httpx.get(collector.running.metrics_url)
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'rtrl_collector_events_total{outcome="accepted"} 1.0' in text
    assert 'rtrl_collector_rejections_total{reason="unknown_field"} 1.0' in text
    assert "rtrl_collector_request_seconds_bucket" in text
    assert "process_resident_memory_bytes" in text
    spec = httpx.get(f"{collector.url}/openapi.json").json()
    post = spec["paths"]["/v1/events"]["post"]
    assert {"200", "401", "429", "503"} <= set(post["responses"])
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_unreachable_kafka_answers_503_and_accepts_nothing(
    topic_names: TopicNames, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{free_port_block(1)}"
    handle = make_collector(dead, topic_names, tmp_path, delivery_timeout_s=1.5)
    try:
        answers = [handle.post([valid_event()]) for _ in range(2)]
        for answer in answers:
            assert answer.status_code == 503
            assert answer.json()["reason"] == "unavailable"
            assert int(answer.headers["Retry-After"]) >= 1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and httpx.get(f"{handle.url}/readyz").status_code != 503:
            time.sleep(0.1)
        assert httpx.get(f"{handle.url}/readyz").json()["reason"] == "unavailable"
        assert httpx.get(f"{handle.url}/livez").status_code == 200  # alive: do not restart it
        started = time.monotonic()
        assert handle.post([valid_event()]).status_code == 503
        assert time.monotonic() - started < 1.0  # refused at once, nothing queued
    finally:
        handle.running.stop(timeout_s=2)


def test_a_full_producer_queue_answers_503(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> None:
    handle = make_collector(kafka_bootstrap, topic_names, tmp_path, producer_queue_max=3)
    try:
        assert handle.post([valid_event() for _ in range(3)]).status_code == 200
        answer = handle.post([valid_event() for _ in range(5)])
        assert answer.status_code == 503 and "Retry-After" in answer.headers
        body = answer.json()
        assert (body["reason"], body["detail"]) == ("unavailable", "producer queue full")
        assert body["request_id"] == answer.headers["x-request-id"]
    finally:
        handle.running.stop()


def test_a_collector_killed_after_answering_has_lost_nothing(
    kafka_bootstrap: str,
    topic_names: TopicNames,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert rtrl_main(["keys", "create", "--org", ORG, "--key-db", str(tmp_path / "k.db")]) == 0
    key = capsys.readouterr().out.strip()
    process = CollectorProcess(kafka_bootstrap, topic_names, tmp_path / "k.db")
    try:
        events = [valid_event() for _ in range(200)]
        answer = httpx.post(
            f"{process.url}/v1/events",
            json={"events": events},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json()["accepted"] == 200
    finally:
        process.kill()  # SIGKILL right after the answer: no flush, no goodbye
    written = drain_events(kafka_bootstrap, topic_names.events, expected=200, timeout=20)
    assert {e["event_id"] for e in written} == {e["event_id"] for e in events}


def test_several_worker_processes_serve_one_port_and_stop_cleanly(
    kafka_bootstrap: str,
    topic_names: TopicNames,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert rtrl_main(["keys", "create", "--org", ORG, "--key-db", str(tmp_path / "k.db")]) == 0
    key = capsys.readouterr().out.strip()
    process = CollectorProcess(kafka_bootstrap, topic_names, tmp_path / "k.db", workers=2)
    try:
        workers = Path(f"/proc/{process.proc.pid}/task/{process.proc.pid}/children")
        assert len(workers.read_text().split()) == 2
        events = [valid_event() for _ in range(100)]
        for i in range(0, 100, 10):  # a connection per request: the workers share them
            answer = httpx.post(
                f"{process.url}/v1/events",
                json={"events": events[i : i + 10]},
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            )
            assert answer.status_code == 200 and answer.json()["accepted"] == 10
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(30) == 0
    finally:
        process.kill()
    written = drain_events(kafka_bootstrap, topic_names.events, expected=100, timeout=20)
    assert {e["event_id"] for e in written} == {e["event_id"] for e in events}


def test_workers_do_not_outlive_a_killed_collector(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> None:
    process = CollectorProcess(kafka_bootstrap, topic_names, tmp_path / "k.db", workers=2)
    pid = process.proc.pid
    workers = [int(w) for w in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    process.kill()  # SIGKILL to the parent alone
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{w}").exists() and "Z" not in _state(w) for w in workers):
        assert time.monotonic() < deadline, "a worker outlived its collector"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"
