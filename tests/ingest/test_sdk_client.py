"""The SDK against a scripted HTTP server: emit never raises, batching, retries, rejections."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ingest.sdk import Client, EmitResult, Rejection, SdkConfig
from tests.support.collector import ORG, ScriptedCollector


@pytest.fixture
def server() -> Iterator[ScriptedCollector]:
    s = ScriptedCollector()
    yield s
    s.stop()


def make_client(url: str, on_rejected: Any = None, **overrides: Any) -> Client:
    settings: dict[str, Any] = {
        "endpoint": url,
        "api_key": "rtrl_test",
        "org_id": ORG,
        "flush_interval_s": 0.05,
    }
    settings.update(overrides)
    return Client(SdkConfig(**settings), on_rejected=on_rejected)


def emit_one(client: Client, interaction_id: str = "i-1", **fields: Any) -> EmitResult:
    return client.emit(
        "edit.accepted",
        interaction_id,
        {"edit_id": "e-1"},
        session_id="s-1",
        user_id="u-1",
        checkpoint_id="ck-1",
        **fields,
    )


def test_emit_answers_instead_of_raising(server: ScriptedCollector) -> None:
    client = make_client(server.url)
    try:
        assert emit_one(client) is EmitResult.queued
        assert client.emit("no.such.type", "i-1") is EmitResult.invalid
        assert emit_one(client, payload_typo=1) is EmitResult.invalid
        assert client.emit(None, None, object()) is EmitResult.invalid  # type: ignore[arg-type]
        assert emit_one(client, received_at="2026-11-30T00:00:00Z") is EmitResult.invalid
        assert client.flush(5) == 0
        counters = client.counters()
        assert (counters.queued, counters.sent, counters.invalid) == (1, 1, 4)
        event = server.batches[0][0]
        assert event["org_id"] == ORG and "sent_at" in event and len(event["event_id"]) == 36
    finally:
        client.close(2)
    assert emit_one(client) is EmitResult.closed


def test_full_queue_is_counted_not_raised(tmp_path) -> None:
    # A dead endpoint and a tiny queue: the sender is stuck in backoff, emit still returns.
    client = make_client("http://127.0.0.1:9", queue_max_events=5, spool_max_events=3)
    try:
        results = [emit_one(client) for _ in range(200)]
        started = time.perf_counter()
        emit_one(client)
        assert time.perf_counter() - started < 0.05
        assert EmitResult.queued in results
        counters = client.counters()
        assert counters.dropped > 0 and counters.queued + counters.dropped >= 200
    finally:
        assert client.close(0.5) > 0


def test_batches_by_count_and_keeps_event_ids_across_retries() -> None:
    server = ScriptedCollector([(503, {"Retry-After": "1"}), (500, {})])
    client = make_client(server.url, batch_max_events=10, flush_interval_s=10)
    try:
        ids = []
        for n in range(25):
            emit_one(client, interaction_id=f"i-{n}", event_id=f"ev-{n}")
            ids.append(f"ev-{n}")
        assert client.flush(15) == 0
        first, retried = server.batches[0], server.batches[1]
        assert [e["event_id"] for e in first] == [e["event_id"] for e in retried]
        assert len(first) == 10
        assert server.times[1] - server.times[0] >= 1.0  # Retry-After honoured
        assert sorted(set(server.received_ids())) == sorted(ids)
        assert client.counters().retried == 20 and client.counters().sent == 25
    finally:
        client.close(1)
        server.stop()


def test_final_4xx_is_reported_not_retried() -> None:
    server = ScriptedCollector([(401, {})])
    seen: list[Rejection] = []
    client = make_client(server.url, on_rejected=seen.extend)
    try:
        emit_one(client, event_id="ev-a")
        assert client.flush(5) == 0
        emit_one(client, event_id="ev-b")
        assert client.flush(5) == 0
        assert [(r.event_id, r.reason, r.status) for r in seen] == [("ev-a", "http_401", 401)]
        assert server.received_ids() == ["ev-a", "ev-b"]
        assert client.counters().rejected == 1 and client.counters().sent == 1
    finally:
        client.close(1)
        server.stop()


def test_privacy_mode_and_sampling(server: ScriptedCollector) -> None:
    client = make_client(server.url, privacy_mode=True, sample_rate=0.5)
    try:
        outcomes = {f"i-{n}": emit_one(client, interaction_id=f"i-{n}") for n in range(200)}
        again = {i: emit_one(client, interaction_id=i) for i in outcomes}
        assert outcomes == again  # sampling decides per interaction, consistently
        kept = sum(o is EmitResult.queued for o in outcomes.values())
        assert 60 < kept < 140
        assert client.flush(5) == 0
        events = [e for b in server.batches for e in b]
        assert len(events) == 2 * kept and all(e["privacy_mode"] is True for e in events)
        assert client.counters().sampled_out == 2 * (200 - kept)
    finally:
        client.close(1)


def test_flush_has_a_deadline_and_says_what_is_left() -> None:
    client = make_client("http://127.0.0.1:9")
    try:
        for _ in range(5):
            emit_one(client)
        started = time.monotonic()
        assert client.flush(0.3) == 5
        assert time.monotonic() - started < 1.0
    finally:
        assert client.close(0.2) == 5
    assert client.counters().dropped == 5  # a memory spool cannot keep them


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sender_restarts_in_a_forked_child(server: ScriptedCollector) -> None:
    client = make_client(server.url)
    try:
        emit_one(client, event_id="from-parent")
        assert client.flush(5) == 0
        pid = os.fork()
        if pid == 0:  # the child: its own sender must deliver, then exit without cleanup
            ok = emit_one(client, event_id="from-child") is EmitResult.queued
            os._exit(0 if ok and client.flush(5) == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        emit_one(client, event_id="parent-after-fork")
        assert client.flush(5) == 0
        assert sorted(server.received_ids()) == ["from-child", "from-parent", "parent-after-fork"]
    finally:
        client.close(1)
