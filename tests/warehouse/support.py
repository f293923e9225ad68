"""Helpers several warehouse test modules share: the A/B fixture computed by hand
(``tests/fixtures/ab/README.md``) and its expected report, a search for a user's rows left
anywhere, and the sink killed mid-stream then run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import duckdb
import polars as pl
import pytest

from rewards.config import RewardConfig
from rewards.function import compute_record
from warehouse.store import Store

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "ab"


def fixture_events() -> list[dict]:
    return [json.loads(line) for line in (FIXTURE / "events.jsonl").read_text().splitlines()]


def fixture_records() -> list[dict]:
    by_id: dict[str, list[dict]] = defaultdict(list)
    for event in fixture_events():
        by_id[event["interaction_id"]].append(event)
    return [compute_record(evs, RewardConfig()).to_json_dict() for evs in by_id.values()]


def assert_matches_expected(rows) -> None:  # noqa: ANN001
    expected = json.loads((FIXTURE / "expected.json").read_text())
    got = {r.metric: r for r in rows}
    assert set(got) == set(expected["metrics"])
    for metric, want in expected["metrics"].items():
        row = got[metric]
        assert (row.arm, row.control_arm, row.n_users, row.n_interactions) == (
            expected["arm"],
            expected["control"],
            expected["n_users"],
            expected["n_interactions"],
        )
        for field, value in want.items():
            if value is None:  # undefined: a change relative to a control of 0
                assert getattr(row, field) is None, (metric, field)
            else:
                assert getattr(row, field) == pytest.approx(value, rel=1e-9, abs=1e-12), (
                    metric, field)  # fmt: skip


def rows_mentioning(store: Store, db: str, needles: set[str]) -> list[str]:
    """Every place (file or table) that still holds one of ``needles`` in a text column."""
    hits = []
    for relative in store.files(""):
        frame = store.read_parquet(relative)
        for name, dtype in frame.schema.items():
            if dtype == pl.String and frame[name].is_in(list(needles)).any():
                hits.append(f"{relative}:{name}")
    for relative in store.files("", ".json"):
        if relative.endswith("forgotten.json"):
            continue  # the list that keeps them out holds their ids by design
        text = (store.read_bytes(relative) or b"").decode()
        hits += [f"{relative}:text" for n in needles if n in text]
    con = duckdb.connect(db, read_only=True)
    try:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            cols = [c for c, t in con.execute(
                f"SELECT column_name, data_type FROM information_schema.columns "
                f"WHERE table_name = '{table}'").fetchall() if t == "VARCHAR"]  # fmt: skip
            for col in cols:
                row = con.execute(f"SELECT count(*) FROM {table} WHERE list_contains(?, {col})",
                                  [sorted(needles)]).fetchone()  # fmt: skip
                assert row is not None  # an aggregate returns one row
                if row[0]:
                    hits.append(f"db:{table}.{col}")
    finally:
        con.close()
    return hits


def sink_cmd(bootstrap: str, prefix: str, root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "warehouse", "warehouse", "sink", "--bootstrap", bootstrap,
            "--topic-prefix", prefix, "--warehouse", str(root), "--group-id", f"sink-{prefix}",
            "--instance-id", "sink-0",
            *extra]  # fmt: skip


def kill_then_rerun_sink(bootstrap: str, prefix: str, root: Path, dataset: str, files: int,
                         max_rows: int) -> None:  # fmt: skip
    """Start the sink with flushes of ``max_rows``, SIGKILL it once ``dataset`` has ``files``
    files, then run it again with ``--once`` until it has drained the topics: what the killed
    sink wrote, committed or not, lies there for the restart to sort out."""
    sink = subprocess.Popen(
        sink_cmd(bootstrap, prefix, root, "--max-rows", str(max_rows)),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    store = Store(str(root))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(store.files(dataset))) < files:
        time.sleep(0.02)
    os.kill(sink.pid, signal.SIGKILL)
    sink.wait(10)
    assert sink.stderr is not None
    assert len(list(store.files(dataset))) >= files, sink.stderr.read().decode()[-2000:]
    done = subprocess.run(
        sink_cmd(bootstrap, prefix, root, "--once", "--max-rows", "5000"),
        cwd=REPO,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
