"""`forget`: no row of the user anywhere, and none comes back through the sink's encoder."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import duckdb
import orjson
import pytest

from infra.topics import TopicNames
from tests.support.kafka import drain, produce_json
from tests.support.warehouse import land, records_and_events
from tests.warehouse.support import rows_mentioning
from warehouse.batches import build_batches
from warehouse.encode import Message, encode
from warehouse.forget import forget
from warehouse.privacy import load_forgotten
from warehouse.store import Store
from warehouse.tombstones import TombstoneError, tombstone_rewards


def test_forget_removes_every_row_and_keeps_them_out(tmp_path):
    store = Store(str(tmp_path))
    records, events = records_and_events(300, seed=21)
    land(store, "events", events)
    land(store, "rewards", records)
    rollouts = [{"interaction_id": r["interaction_id"], "checkpoint_id": r["checkpoint_id"],
                 "completion_token_ids": [1, 2, 3]} for r in records]  # fmt: skip
    land(store, "rollouts", rollouts)
    build_batches(store, now=datetime(2026, 12, 1, tzinfo=UTC))
    user = max(
        (r["user_id"] for r in records if r["user_id"]),
        key=lambda u: sum(r["user_id"] == u for r in records),
    )  # the busiest user
    theirs = {r["interaction_id"] for r in records if r["user_id"] == user}
    others = len(records) - len(theirs)

    result = forget(store, user)
    assert result.interactions == len(theirs) and result.rows_removed > len(theirs)
    db = str(tmp_path / "warehouse.duckdb")
    assert rows_mentioning(store, db, {user, *theirs}) == []
    con = duckdb.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM rewards").fetchone()[0] == others
    finally:
        con.close()

    # A late revision of one of their records reaches the sink: it is dropped, not landed.
    late = dict(next(r for r in records if r["user_id"] == user), revision=3)
    message = Message(9999, late["interaction_id"].encode(), orjson.dumps(late), 0)
    assert encode("rewards", 0, [message], load_forgotten(store)) == {}
    assert build_batches(store, now=datetime(2026, 12, 2, tzinfo=UTC)) == []


def _busiest_user(records: list[dict]) -> tuple[str, set[str]]:
    user = max(
        (r["user_id"] for r in records if r["user_id"]),
        key=lambda u: sum(r["user_id"] == u for r in records),
    )
    return user, {r["interaction_id"] for r in records if r["user_id"] == user}


def test_forget_tombstones_the_users_records_on_the_rewards_topic(
    tmp_path, kafka_bootstrap: str, topic_names: TopicNames
) -> None:
    store = Store(str(tmp_path))
    records, events = records_and_events(120, seed=5)
    land(store, "events", events)
    land(store, "rewards", records)
    produce_json(kafka_bootstrap, topic_names.rewards, records, key=lambda r: r["interaction_id"])
    user, theirs = _busiest_user(records)

    erase = functools.partial(tombstone_rewards, kafka_bootstrap, topic_names.rewards)
    assert forget(store, user, erase=erase).erased == len(theirs)

    messages = drain(kafka_bootstrap, topic_names.rewards, expected=len(records) + len(theirs))
    latest = {m.key().decode(): m for m in messages}  # what compaction keeps of each key
    assert {k for k, m in latest.items() if m.value() is None} == theirs
    partitions = {m.key().decode(): m.partition() for m in messages if m.value() is not None}
    assert all(latest[k].partition() == partitions[k] for k in theirs)  # where compaction looks


def test_a_failed_erase_changes_no_file_and_forget_can_run_again(tmp_path) -> None:
    store = Store(str(tmp_path))
    records, events = records_and_events(60, seed=8)
    land(store, "rewards", records)
    user, theirs = _busiest_user(records)
    files = {f: store.read_bytes(f) for f in store.files("")}

    def broker_down(interactions: set[str]) -> int:
        raise TombstoneError("0 of 3 tombstones acknowledged")

    with pytest.raises(TombstoneError):
        forget(store, user, erase=broker_down)
    assert {f: store.read_bytes(f) for f in store.files("")} == files
    assert forget(store, user, erase=len).erased == len(theirs)  # found again, then erased
