"""End to end on the real broker: SDK -> collector -> telemetry.events, through outages and
crashes. Every event arrives at least once, with the event_id the SDK gave it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from ingest.sdk import Client
from tests.ingest.sdk_py import emit_interactions, sdk_config
from tests.support.collector import REPO, CollectorHandle, drain_until

N = 300


def assert_each_once_with_one_id(events: list[dict[str, Any]], prefix: str, n: int) -> None:
    ids_by_interaction: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e["interaction_id"].startswith(prefix + "-"):
            ids_by_interaction[e["interaction_id"]].add(e["event_id"])
            assert "received_at" in e and "sent_at" in e
    assert len(ids_by_interaction) == n, f"{n - len(ids_by_interaction)} events never arrived"
    # A retry that changed the id would show up as a second id for one interaction.
    assert all(len(ids) == 1 for ids in ids_by_interaction.values())


def _all_seen(prefix: str, n: int):
    return lambda events: (
        len({e["interaction_id"] for e in events if e["interaction_id"].startswith(prefix + "-")})
        >= n
    )


def test_events_emitted_while_the_collector_is_down_arrive_later(
    collector: CollectorHandle, kafka_bootstrap: str, tmp_path: Path
) -> None:
    collector.running.stop()
    client = Client(sdk_config(collector.url, collector.key, tmp_path / "spool.sqlite"))
    try:
        emit_interactions(client, "outage", N)
        assert client.flush(1.0) == N  # nobody answers: all kept
        assert client.counters().retried > 0
        collector.restart()
        assert client.flush(30) == 0
        assert client.counters().sent == N
    finally:
        client.close(5)
    events = drain_until(kafka_bootstrap, collector.names.events, _all_seen("outage", N))
    assert_each_once_with_one_id(events, "outage", N)


EMITTER = """
import sys, time
from pathlib import Path
from ingest.sdk import Client, SdkConfig
from tests.ingest.sdk_py import emit_interactions, sdk_config
url, key, spool, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
# Small batches: sending takes a while, so the kill finds work left in the spool.
client = Client(sdk_config(url, key, spool, batch_max_events=2))
emit_interactions(client, "killed", n)
while client.counters().spooled < n:
    time.sleep(0.001)
print("spooled", flush=True)
time.sleep(60)
"""


def test_a_process_killed_with_sigkill_leaves_a_spool_the_next_one_delivers(
    collector: CollectorHandle, kafka_bootstrap: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-c", EMITTER, collector.url, collector.key, str(spool), str(N)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "spooled"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    assert child.returncode == -signal.SIGKILL

    client = Client(sdk_config(collector.url, collector.key, spool))
    try:
        assert client.flush(30) == 0
        delivered_by_second = client.counters().sent
    finally:
        client.close(5)
    assert delivered_by_second > 0  # the kill left work behind, and the spool carried it
    events = drain_until(kafka_bootstrap, collector.names.events, _all_seen("killed", N))
    assert_each_once_with_one_id(events, "killed", N)
