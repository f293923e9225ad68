"""The catalog: every model's keys and invariants hold on realistic data, broken ones are
caught, and dashboards read it through SQLAlchemy without being able to write."""

from __future__ import annotations

import duckdb
import orjson
import pytest
import sqlalchemy as sa

from tests.support.warehouse import land, records_and_events
from warehouse.catalog import build_catalog, check_models, load_models, sqlalchemy_url
from warehouse.encode import Message, encode
from warehouse.layout import join, part_name
from warehouse.store import Store

MARTS = (
    "rewards",
    "rewards_daily_by_checkpoint",
    "monitor_rates",
    "ab_arms",
    "ab_report",
    "ab_srm",
    "lineage",
    "dlq_reasons",
    "checkpoints",
)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """Records with corrections and a redelivered file, as a crash-and-rerun leaves them."""
    store = Store(str(tmp_path_factory.mktemp("wh")))
    records, events = records_and_events(400, seed=11)
    land(store, "events", events)
    land(store, "rewards", records, partition=0)
    revised = [dict(r, revision=2) for r in records[::7]]
    land(store, "rewards", revised, partition=1)
    land(store, "rewards", revised[:20], partition=4, first_offset=100)  # redelivered copies
    return store, records, revised, build_catalog(store)


def test_every_model_states_grain_and_keys():
    models = {m.name: m for m in load_models()}
    for name in MARTS:
        assert name in models, name
        assert models[name].grain.startswith("one row per"), name
        assert models[name].keys, name
    assert all(m.materialized in ("view", "table") for m in models.values())


def test_keys_and_invariants_hold(warehouse):
    store, records, revised, db = warehouse
    con = duckdb.connect(db, read_only=True)
    try:
        assert list(check_models(con)) == []
        assert con.execute("SELECT count(*) FROM rewards").fetchone()[0] == len(records)
        latest = dict(con.execute("SELECT interaction_id, revision FROM rewards").fetchall())
        assert all(latest[r["interaction_id"]] == 2 for r in revised)
        daily = con.execute("SELECT sum(n_interactions) FROM rewards_daily_by_checkpoint")
        assert daily.fetchone()[0] == len(records)
    finally:
        con.close()


def test_a_broken_invariant_is_reported(warehouse, tmp_path):
    _, _, _, db = warehouse
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(open(db, "rb").read())
    con = duckdb.connect(str(copy))
    try:
        con.execute("INSERT INTO rewards SELECT * FROM rewards LIMIT 1")  # a duplicate key
        con.execute(
            "UPDATE rewards SET reward = NULL WHERE interaction_id = "
            "(SELECT min(interaction_id) FROM rewards WHERE status = 'scored')"
        )
        problems = list(check_models(con))
    finally:
        con.close()
    assert any(p.startswith("rewards: 1 duplicate key") for p in problems), problems
    assert any("(reward IS NULL)" in p for p in problems), problems


def test_dashboards_read_marts_through_sqlalchemy_and_cannot_write(warehouse):
    _, records, _, db = warehouse
    engine = sa.create_engine(sqlalchemy_url(db))
    try:
        with engine.connect() as conn:
            n = conn.execute(sa.text("SELECT count(*) FROM rewards")).scalar_one()
            assert n == len(records)
            arms = conn.execute(sa.text("SELECT experiment_arm FROM ab_arms")).scalars().all()
            assert set(arms) == {"control", "treatment"}
            assert sa.inspect(conn).has_table("rewards")
        for statement in ("DELETE FROM rewards", "CREATE TABLE x (i INTEGER)",
                          "DROP VIEW monitor_rates"):  # fmt: skip
            with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError, match="read-only"):
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def _land_without(store: Store, records: list[dict], column: str, partition: int) -> None:
    """Records as a sink of before ``column`` wrote them: the file has no such column."""
    messages = [Message(i, r["interaction_id"].encode(), orjson.dumps(r), 1_700_000_000_000)
                for i, r in enumerate(records)]  # fmt: skip
    for folder, frame in encode("rewards", partition, messages).items():
        store.write_parquet(join(folder, part_name(partition, 0, len(records) - 1)),
                            frame.drop(column))  # fmt: skip


def test_files_written_before_a_column_was_added_read_it_as_null(tmp_path):
    records, _ = records_and_events(60, seed=3)
    old_only = Store(str(tmp_path / "old"))
    _land_without(old_only, records, "n_tool_calls", partition=0)
    with duckdb.connect(build_catalog(old_only), read_only=True) as con:
        assert con.execute("SELECT count(*), count(n_tool_calls) FROM rewards").fetchone() == (
            len(records), 0)  # fmt: skip
    mixed = Store(str(tmp_path / "mixed"))
    _land_without(mixed, records[:30], "n_tool_calls", partition=0)
    land(mixed, "rewards", records[30:], partition=1)
    with duckdb.connect(build_catalog(mixed), read_only=True) as con:
        got = dict(con.execute("SELECT interaction_id, n_tool_calls FROM rewards").fetchall())
    assert got == {r["interaction_id"]: (r["n_tool_calls"] if i >= 30 else None)
                   for i, r in enumerate(records)}  # fmt: skip
    assert any(got[r["interaction_id"]] for r in records[30:])
