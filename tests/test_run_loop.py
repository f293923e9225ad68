"""`rtrl run`, the README's main job, end to end: SDK -> collector -> Kafka -> stream worker ->
warehouse -> catalog -> batches -> report. Every simulated interaction must come out as
exactly one reward record in the warehouse's `rewards` mart: nothing lost on any hop."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from rtrl.editor_sim import editor_events
from tests.kafka_helpers import free_port_block

pytestmark = pytest.mark.slow


def test_rtrl_run_lands_every_interaction_once(tmp_path):
    interactions, seed = 200, 3
    kafka_port, http_port = free_port_block(2), free_port_block(1)
    done = subprocess.run(
        [sys.executable, "-m", "rtrl.cli", "run", "--data-dir", str(tmp_path),
         "--port", str(kafka_port), "--collector-port", str(http_port),
         "--interactions", str(interactions), "--seed", str(seed), "--window-s", "6"],
        capture_output=True, text=True, timeout=420,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "mean reward" in done.stdout  # the A/B report was printed
    assert "monitors:" in done.stdout
    assert "exp-context-window" in (tmp_path / "ab.svg").read_text()  # the forest plot

    expected = {e["interaction_id"] for e in editor_events(interactions, seed)}
    with duckdb.connect(str(tmp_path / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute("select interaction_id from rewards").fetchall()
        batches = con.execute("select count(*) from batches").fetchall()[0][0]
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), "an interaction has more than one row in the mart"
    assert set(ids) == expected
    assert batches >= 1
    # the broker the run started is stopped again
    status = subprocess.run(
        [
            sys.executable,
            "-m",
            "rtrl.cli",
            "broker",
            "status",
            "--data-dir",
            str(tmp_path / "kafka"),
        ],
        capture_output=True,
    )
    assert status.returncode == 1
