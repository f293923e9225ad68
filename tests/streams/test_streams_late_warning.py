"""Outcomes that come after their window say so: with a reward window shorter than users take to
revert, the worker counts each event type's late arrivals beside all of them
(``rtrl_stream_late_by_type``, ``rtrl_stream_events_by_type``) and warns in its log that the
rewards scored without the reverts are wrong. Acceptances that come in time raise no warning."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from infra.ports import free_port_block
from infra.topics import TopicNames
from rewards.timestamps import US_PER_S, format_us, to_us
from tests.streams.support import PAST_START, start_worker
from tests.support.kafka import produce_json

T0 = to_us(PAST_START)
N = 30  # interactions, each accepted in time and reverted after its window


def _event(n: int, kind: str, at_s: float, **payload: object) -> dict:
    at = format_us(T0 + int(at_s * US_PER_S))
    return {"schema_version": 1, "event_id": f"e{n}-{kind}", "type": kind, "ts": at,
            "received_at": at, "interaction_id": f"i{n}", "session_id": "s", "user_id": f"u{n}",
            "org_id": "acme", "checkpoint_id": "c", "payload": payload}  # fmt: skip


def _events() -> list[dict]:
    events = []
    for n in range(N):
        start = 3 * n
        events += [_event(n, "interaction.started", start, mode="agent"),
                   _event(n, "agent.edit_proposed", start + 1, edit_id=f"ed{n}",
                          lines_added=1, lines_removed=0),
                   _event(n, "edit.accepted", start + 2, edit_id=f"ed{n}"),
                   _event(n, "edit.reverted", start + 15, edit_id=f"ed{n}")]  # fmt: skip
    return sorted(events, key=lambda e: e["received_at"])


def _metrics(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                     if line and not line.startswith("#"))}  # fmt: skip


def test_reverts_after_the_window_are_counted_and_warned_of(kafka_bootstrap: str,
                                                            topic_names: TopicNames,
                                                            tmp_path: Path) -> None:  # fmt: skip
    config = tmp_path / "reward.json"
    config.write_text(json.dumps({"window_s": 10, "late_s": 60, "grace_s": 1}))
    produce_json(kafka_bootstrap, topic_names.events, _events(),
                 key=lambda e: e["interaction_id"])  # fmt: skip
    port, log = free_port_block(1), tmp_path / "worker.log"
    proc = start_worker(kafka_bootstrap, topic_names.prefix, tmp_path / "w", config,
                        "--metrics-port", str(port), log=log)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        late = 'rtrl_stream_late_by_type_total{type="edit.reverted"}'
        while True:
            try:
                counts = _metrics(port)
            except httpx.HTTPError:
                counts = {}
            if counts.get(late, 0) >= N - 5:
                break
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-2000:]
            time.sleep(0.5)
        said = log.read_text()
    finally:
        proc.terminate()
        proc.wait(30)
    assert counts['rtrl_stream_events_by_type_total{type="edit.reverted"}'] >= counts[late]
    assert counts.get('rtrl_stream_late_by_type_total{type="edit.accepted"}', 0) == 0
    assert (
        "edit.reverted events" in said and "arrived after their interaction's 10 s window" in said
    )
    assert "edit.accepted events" not in said
