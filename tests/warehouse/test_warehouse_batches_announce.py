"""Batch announcements on the real broker: a batch whose announcement failed is announced by the
next build, announcing is idempotent, and `rtrl batches build --watch` builds and announces as
a service until SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import httpx

from infra.compacted import read_latest
from infra.ports import free_port_block
from tests.support.warehouse import land, records_and_events
from warehouse.batches import announce_missing, build_batches
from warehouse.store import Store

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_batches_a_failed_announcement_left_behind_are_announced_once(
    kafka_bootstrap, topic_names, tmp_path
):
    store = Store(str(tmp_path))
    records, _ = records_and_events(200, seed=3)
    land(store, "rewards", records)
    offered = {e.batch_id for e in build_batches(store, now=NOW) if e.offered}
    assert offered  # built and recorded, never announced (as when Kafka was unreachable)
    assert read_latest(kafka_bootstrap, topic_names.batches) == {}
    assert set(announce_missing(kafka_bootstrap, topic_names.batches, store)) == offered
    assert {k.decode() for k in read_latest(kafka_bootstrap, topic_names.batches)} == offered
    assert announce_missing(kafka_bootstrap, topic_names.batches, store) == []


def test_the_batch_service_builds_and_announces_until_sigterm(kafka_bootstrap, topic_names,
                                                              tmp_path):  # fmt: skip
    root = tmp_path / "wh"
    log = tmp_path / "batches.log"
    metrics_port = free_port_block(1)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rtrl.cli",
                "batches",
                "build",
                "--watch",
                "--interval-s",
                "0.5",
                "--warehouse",
                str(root),
                "--settle-s",
                "0",
                "--bootstrap",
                kafka_bootstrap,
                "--topic-prefix",
                topic_names.prefix,
                "--metrics-port",
                str(metrics_port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # closed hours ago, so no window is open, and fresh enough for the batch's freshness
        # gate, which the service measures against the wall clock
        start = datetime.now(UTC) - timedelta(hours=8)
        records, _ = records_and_events(
            150, seed=4, start=start.strftime("%Y-%m-%dT%H:%M:%SZ"), span_s=3600
        )
        land(Store(str(root)), "rewards", records)
        deadline = time.monotonic() + 120
        while not read_latest(kafka_bootstrap, topic_names.batches):
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        # its metrics: the pass that built the batches worked (counted once it has ended)
        worked = re.compile(r'^rtrl_batches_passes_total\{outcome="worked"\} [1-9]', re.M)
        scraped = ""
        while not worked.search(scraped):
            assert time.monotonic() < deadline, scraped
            scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
            time.sleep(0.2)
        assert re.search(r"^rtrl_batches_last_pass_timestamp_seconds [1-9]", scraped, re.M)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()[-2000:]
    checkpoints = {r["checkpoint_id"] for r in records if r["status"] == "scored"}
    announced = read_latest(kafka_bootstrap, topic_names.batches)
    assert len(announced) == len(checkpoints)  # one batch per checkpoint, each announced once
