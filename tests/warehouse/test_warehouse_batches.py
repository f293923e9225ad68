"""Quality gate and manifest: a batch that breaks an expectation is quarantined with its report,
a clean one is offered; privacy-mode rows never reach a batch; nothing is batched twice."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson

from tests.support.warehouse import land, records_and_events
from warehouse.batches import BuildConfig, build_batches, list_batches
from warehouse.layout import QUARANTINE_DIR
from warehouse.quality import QualityConfig
from warehouse.store import Store

NOW = datetime(2026, 12, 1, tzinfo=UTC)  # a day after the workload: settled and fresh


def test_broken_batch_is_quarantined_and_clean_ones_are_offered(tmp_path):
    store = Store(str(tmp_path))
    records, events = records_and_events(300, seed=5)
    bad = next(r for r in records if r["status"] == "scored" and r["checkpoint_id"] == "ckpt-0002")
    bad["reward"] = 40.0  # no configuration of reward spec v1 can give this
    land(store, "rewards", records)
    land(store, "events", events)

    entries = {e.checkpoint_id: e for e in build_batches(store, now=NOW)}
    assert set(entries) == {"ckpt-0001", "ckpt-0002", "ckpt-0003"}
    broken = entries["ckpt-0002"]
    assert (broken.quality, broken.offered) == ("failed", False)
    assert broken.files[0].startswith(QUARANTINE_DIR)
    report = orjson.loads(store.read_bytes(f"{QUARANTINE_DIR}/{broken.batch_id}/validation.json"))
    failed = {r["expectation_config"]["type"] for r in report["results"] if not r["success"]}
    assert failed == {"expect_column_values_to_be_between"}

    offered = list_batches(store, offered_only=True)
    assert {e.checkpoint_id for e in offered} == {"ckpt-0001", "ckpt-0003"}
    assert all(e.quality == "passed" for e in offered)
    assert {e.batch_id for e in list_batches(store)} == {e.batch_id for e in entries.values()}
    for e in offered:
        data = store.read_parquet(e.files[0])
        assert data.height == e.n_rows > 0
        assert data["status"].unique().to_list() == ["scored"]
        assert data["user_id"].null_count() == 0  # privacy-mode rows carry none: none got in
        private = {r["interaction_id"] for r in records if r["censor_reason"] == "privacy_mode"}
        assert private and not private & set(data["interaction_id"].to_list())

    assert build_batches(store, now=NOW) == []  # every interaction is claimed once


def test_stale_or_mostly_censored_candidates_fail_the_gate(tmp_path):
    store = Store(str(tmp_path))
    records, _ = records_and_events(60, seed=9)
    for r in records[: len(records) * 4 // 5]:  # far above the 50 % censored share allowed
        r.update(status="censored", censor_reason="no_outcome", reward=None)
    land(store, "rewards", records)
    strict = BuildConfig(quality=QualityConfig(max_age_s=3600))
    entries = build_batches(store, strict, now=NOW)
    assert entries and not any(e.offered for e in entries)
    for e in entries:
        report = orjson.loads(store.read_bytes(f"{QUARANTINE_DIR}/{e.batch_id}/validation.json"))
        failed = {r["expectation_config"]["type"] for r in report["results"] if not r["success"]}
        assert {"expect_column_min_to_be_between", "expect_column_values_to_be_in_set"} <= failed
        assert store.read_parquet(e.files[0]).height == e.n_rows
