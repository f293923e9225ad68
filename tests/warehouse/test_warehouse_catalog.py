"""The catalog: every model's keys and invariants hold on realistic data, broken ones are
caught, and dashboards read it through SQLAlchemy without being able to write."""

from __future__ import annotations

import duckdb
import pytest
import sqlalchemy as sa

from tests.support.warehouse import land, records_and_events
from warehouse.catalog import build_catalog, check_models, load_models, sqlalchemy_url
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
