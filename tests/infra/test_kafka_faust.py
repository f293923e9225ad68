"""Faust on Kafka 4: a table survives a restart with its local store wiped.

The worker (``tests/infra/faust_probe_app.py``) counts messages per key into a RocksDB table.
We count N messages, stop it with SIGTERM, delete its store, start it again: the counts
must come back from the changelog topic alone, then M more messages must add up to N + M
per key -- nothing lost, nothing counted twice. The input topic is created here (the
broker refuses auto-creation); Faust creates its changelog and leader topics itself.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.settings import admin as admin_conf
from infra.settings import client
from tests.infra.faust_probe_app import changelog_topic
from tests.support.kafka import produce_json

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 3
KEYS = [f"k{i}" for i in range(7)]


class ProbeWorker:
    """One run of the probe worker as a child process, with its log kept for failures."""

    def __init__(self, bootstrap: str, app_id: str, topic: str, work: Path, run: int) -> None:
        self.snapshot = work / "snapshot.json"
        self.data_dir = work / "store"
        self.log_path = work / f"worker-{run}.log"
        self.snapshot.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "tests.infra.faust_probe_app",
            "--broker",
            bootstrap,
            "--app-id",
            app_id,
            "--topic",
            topic,
            "--partitions",
            str(PARTITIONS),
            "--data-dir",
            str(self.data_dir),
            "--snapshot",
            str(self.snapshot),
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def counts(self) -> dict[str, int] | None:
        try:
            return json.loads(self.snapshot.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def wait_for_counts(self, expected: dict[str, int], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"worker exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.counts() == expected:
                return
            time.sleep(0.2)
        pytest.fail(f"table is {self.counts()}, expected {expected}\n{self.log_tail()}")

    def assert_stays(self, expected: dict[str, int], seconds: float = 1.5) -> None:
        """Nothing arrives late: a re-read input would show up as counts that keep growing."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.counts() == expected
            time.sleep(0.2)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def _committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer(client(bootstrap, **{"group.id": group}))
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        c.close()
    return sum(max(tp.offset, 0) for tp in tps)


def _produce(bootstrap: str, topic: str, start: int, n: int) -> Counter:
    keys = [KEYS[(i * 3) % len(KEYS)] for i in range(start, start + n)]
    produce_json(
        bootstrap,
        topic,
        [{"i": i, "key": k} for i, k in enumerate(keys, start)],
        key=lambda v: v["key"],
    )
    return Counter(keys)


@pytest.mark.slow
def test_faust_table_recovers_from_changelog_after_store_is_wiped(kafka_bootstrap, tmp_path):
    app_id = f"probe{uuid.uuid4().hex[:8]}"
    topic = f"{app_id}.input"
    admin = AdminClient(admin_conf(kafka_bootstrap))
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(timeout=30)

    worker = ProbeWorker(kafka_bootstrap, app_id, topic, tmp_path, run=1)
    try:
        worker.wait_for_counts({})  # ready: the first snapshot of an empty table
        expected = _produce(kafka_bootstrap, topic, 0, 300)
        worker.wait_for_counts(dict(expected))
        worker.assert_stays(dict(expected))
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.stop()
    # A clean stop commits what the table has counted: a restart re-reads nothing.
    assert _committed(kafka_bootstrap, app_id, topic) == 300
    store_files = [p for p in worker.data_dir.rglob("*") if p.is_file()]
    assert store_files, "the RocksDB store should have been on disk"
    shutil.rmtree(worker.data_dir)

    worker = ProbeWorker(kafka_bootstrap, app_id, topic, tmp_path, run=2)
    try:
        worker.wait_for_counts(dict(expected))  # rebuilt from the changelog alone
        expected += _produce(kafka_bootstrap, topic, 300, 200)
        worker.wait_for_counts(dict(expected))
        worker.assert_stays(dict(expected))
        assert sum(expected.values()) == 500
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.stop()
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[changelog_topic(app_id)].partitions) == PARTITIONS
