"""The TypeScript SDK end to end on the real broker: a Node process -> collector ->
telemetry.events, through a collector outage and a SIGKILL of the emitting process. Every event
arrives at least once with its original event_id."""

from __future__ import annotations

import os
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.ingest.sdk_ts import NodeEmitter
from tests.support.collector import CollectorHandle, drain_until

N = 300


def _all_seen(prefix: str, n: int) -> Any:
    return lambda events: (
        len({e["interaction_id"] for e in events if e["interaction_id"].startswith(prefix + "-")})
        >= n
    )


def assert_each_arrived_with_its_id(
    events: list[dict[str, Any]], prefix: str, n: int, chosen: dict[str, str]
) -> None:
    ids_by_interaction: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e["interaction_id"].startswith(prefix + "-"):
            ids_by_interaction[e["interaction_id"]].add(e["event_id"])
            assert "received_at" in e and "sent_at" in e
            assert e["client"]["name"] == "rtrl-ts-sdk"
    assert len(ids_by_interaction) == n, f"{n - len(ids_by_interaction)} events never arrived"
    # A retry that changed an id would show up as a second id for one interaction.
    assert all(len(ids) == 1 for ids in ids_by_interaction.values())
    assert len(chosen) == n // 2
    assert all(ids_by_interaction[i] == {event_id} for i, event_id in chosen.items())


def test_events_emitted_while_the_collector_is_down_arrive_later(
    collector: CollectorHandle, kafka_bootstrap: str, tmp_path: Path
) -> None:
    collector.running.stop()
    emitter = NodeEmitter(collector.url, collector.key, tmp_path / "spool", "ts-outage", N)
    try:
        assert emitter.started["statuses"] == {"queued": N}
        down = emitter.command("flush 1000")
        assert down["pending"] == N  # nobody answers: all kept
        assert down["counters"]["retried"] > 0
        collector.restart()
        up = emitter.command("flush 30000")
        assert up["pending"] == 0
        assert up["counters"]["sent"] == N
        assert emitter.command("close 5000")["left"] == 0
    finally:
        emitter.stop()
    events = drain_until(kafka_bootstrap, collector.names.events, _all_seen("ts-outage", N))
    assert_each_arrived_with_its_id(events, "ts-outage", N, emitter.started["ids"])


def test_a_node_process_killed_with_sigkill_leaves_a_spool_the_next_one_delivers(
    collector: CollectorHandle, kafka_bootstrap: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    # Small batches: sending takes a while, so the kill finds work left in the spool.
    first = NodeEmitter(collector.url, collector.key, spool, "ts-killed", N, batch=2)
    try:
        assert first.command("wait-spooled")["spooled"] == N
    finally:
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
    assert first.proc.returncode == -signal.SIGKILL

    second = NodeEmitter(collector.url, collector.key, spool, "unused", 0)
    try:
        answer = second.command("flush 30000")
        assert answer["pending"] == 0
        assert answer["counters"]["sent"] > 0  # the kill left work behind; the spool carried it
        second.command("close 5000")
    finally:
        second.stop()
    events = drain_until(kafka_bootstrap, collector.names.events, _all_seen("ts-killed", N))
    assert_each_arrived_with_its_id(events, "ts-killed", N, first.started["ids"])
