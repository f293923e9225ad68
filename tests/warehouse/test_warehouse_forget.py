"""`forget`: no row of the user anywhere, and none comes back through the sink's encoder."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import duckdb
import orjson
import pytest

from infra.topics import TopicNames
from rewards.tenant_keys import rewards_key
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
    org, user, theirs = _busiest_user(records)
    others = len(records) - len(theirs)

    result = forget(store, org, user)
    assert result.interactions == len(theirs) and result.rows_removed > len(theirs)
    db = str(tmp_path / "warehouse.duckdb")
    assert rows_mentioning(store, db, {user, *theirs}) == []
    con = duckdb.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM rewards").fetchone()[0] == others
    finally:
        con.close()

    # A late revision of one of their records reaches the sink: it is dropped, not landed.
    late = dict(next(r for r in records if _of(r) == (org, user)), revision=3)
    message = Message(9999, late["interaction_id"].encode(), orjson.dumps(late), 0)
    assert encode("rewards", 0, [message], load_forgotten(store)) == {}
    assert build_batches(store, now=datetime(2026, 12, 2, tzinfo=UTC)) == []


def _key(record: dict) -> str:
    return rewards_key(record["org_id"], record["interaction_id"]).decode()


def _of(record: dict) -> tuple[str, str]:
    return record["org_id"], record["user_id"]


def _busiest_user(records: list[dict]) -> tuple[str, str, set[str]]:
    """The (org, user) with the most interactions, and their interaction ids."""
    org, user = max(
        (_of(r) for r in records if r["user_id"]),
        key=lambda o_u: sum(_of(r) == o_u for r in records),
    )
    return org, user, {r["interaction_id"] for r in records if _of(r) == (org, user)}


def test_forget_tombstones_the_users_records_on_the_rewards_topic(
    tmp_path, kafka_bootstrap: str, topic_names: TopicNames
) -> None:
    store = Store(str(tmp_path))
    records, events = records_and_events(120, seed=5)
    land(store, "events", events)
    land(store, "rewards", records)
    produce_json(kafka_bootstrap, topic_names.rewards, records, key=_key)
    org, user, theirs = _busiest_user(records)

    erase = functools.partial(tombstone_rewards, kafka_bootstrap, topic_names.rewards)
    # the org-scoped keys, and the bare ones a record written before them was under
    assert forget(store, org, user, erase=erase).erased == 2 * len(theirs)

    expected = len(records) + 2 * len(theirs)
    messages = drain(kafka_bootstrap, topic_names.rewards, expected=expected)
    latest = {m.key().decode(): m for m in messages}  # what compaction keeps of each key
    scoped = {rewards_key(org, i).decode() for i in theirs}
    assert {k for k, m in latest.items() if m.value() is None} == scoped | theirs
    partitions = {m.key().decode(): m.partition() for m in messages if m.value() is not None}
    assert all(latest[k].partition() == partitions[k] for k in scoped)  # where compaction looks


def test_a_failed_erase_changes_no_file_and_forget_can_run_again(tmp_path) -> None:
    store = Store(str(tmp_path))
    records, events = records_and_events(60, seed=8)
    land(store, "rewards", records)
    org, user, theirs = _busiest_user(records)
    files = {f: store.read_bytes(f) for f in store.files("")}

    def broker_down(interactions: set[str]) -> int:
        raise TombstoneError("0 of 3 tombstones acknowledged")

    with pytest.raises(TombstoneError):
        forget(store, org, user, erase=broker_down)
    assert {f: store.read_bytes(f) for f in store.files("")} == files
    assert forget(store, org, user, erase=len).erased == 2 * len(theirs)  # found again, erased


def _twin(org: str) -> str:
    return f"twin-of-{org}"


def _rows(db: str, table: str, org: str, user: str) -> int:
    with duckdb.connect(db, read_only=True) as con:
        query = f"SELECT count(*) FROM {table} WHERE org_id = ? AND user_id = ?"
        (count,) = con.execute(query, [org, user]).fetchone() or (None,)
    return int(count)


def test_forgetting_one_organisations_user_leaves_anothers_same_ids(
    tmp_path, kafka_bootstrap: str, topic_names: TopicNames
) -> None:
    """Each organisation's twin sends the same user and interaction ids; forgetting a user keeps
    the twin's in every file and on the topic, and lets the twin's later records land."""
    store = Store(str(tmp_path))
    records, events = records_and_events(120, seed=5)
    other_records = [dict(r, org_id=_twin(r["org_id"])) for r in records]
    other_events = [dict(e, org_id=_twin(e["org_id"])) for e in events]
    land(store, "events", events + other_events)
    land(store, "rewards", records + other_records)
    produce_json(kafka_bootstrap, topic_names.rewards, records + other_records, key=_key)
    org, user, theirs = _busiest_user(records)
    other = _twin(org)
    n_events = sum(_of(e) == (org, user) for e in events)

    erase = functools.partial(tombstone_rewards, kafka_bootstrap, topic_names.rewards)
    result = forget(store, org, user, erase=erase)
    # Every id is the twin's too, so no bare-key tombstone: it could erase org-02's record.
    assert (result.erased, result.shared_ids) == (len(theirs), len(theirs))

    db = str(tmp_path / "warehouse.duckdb")
    assert (_rows(db, "rewards", org, user), _rows(db, "stg_events", org, user)) == (0, 0)
    assert _rows(db, "rewards", other, user) == len(theirs)
    assert _rows(db, "stg_events", other, user) == n_events
    with duckdb.connect(db, read_only=True) as con:
        kept = con.execute("SELECT count(*) FROM rewards WHERE org_id = ?", [other]).fetchone()
    assert kept == (sum(r["org_id"] == org for r in records),)

    messages = drain(kafka_bootstrap, topic_names.rewards, expected=2 * len(records) + len(theirs))
    latest = {m.key().decode(): m for m in messages}  # what compaction keeps of each key
    assert {k for k, m in latest.items() if m.value() is None} == {
        rewards_key(org, i).decode() for i in theirs
    }
    survivors = [orjson.loads(latest[rewards_key(other, i).decode()].value()) for i in theirs]
    assert {(r["org_id"], r["user_id"]) for r in survivors} == {(other, user)}

    # A late revision reaches the sink: the forgotten user's is dropped, the twin's lands.
    forgotten = load_forgotten(store)
    for owner, landed in ((org, 0), (other, 1)):
        first = next(r for r in records if _of(r) == (org, user))
        late = dict(first, org_id=owner, revision=3)
        message = Message(9999, _key(late).encode(), orjson.dumps(late), 0)
        frames = encode("rewards", 0, [message], forgotten)
        assert sum(f.height for f in frames.values()) == landed, owner

    # A file that did not pass the sink's filter (a restored backup): the batches skip the user.
    land(store, "rewards", [r for r in records if _of(r) == (org, user)], first_offset=10_000)
    entries = build_batches(store, now=datetime(2026, 12, 1, tzinfo=UTC))
    batched = {
        _of(row) for e in entries for f in e.files for row in store.read_parquet(f).to_dicts()
    }
    assert (other, user) in batched and (org, user) not in batched
