"""The DuckDB catalog: staging views over the Parquet files, and the marts built on them.

Every model is one file of ``warehouse/sql/``, run in name order. Its header states what it is::

    -- materialized: view | table
    -- grain: one row per ...
    -- keys: column, column
    -- check: SELECT ... (a query that returns no row when an invariant holds)

Staging views only rename and cast; marts join and aggregate. Views read the files at query
time, so new data shows without a rebuild; the tables (the deduplicated ``rewards`` mart,
``interaction_outcomes``, the A/B aggregates, ``checkpoints``, ``dlq_reasons``) are rebuilt by
:func:`build_catalog`. Two tables hold statistics computed in Python (``ab_report``,
``ab_srm``): their SQL file creates the table, then :data:`warehouse.ab_mart.FILLERS` fills it,
in the same pass and order as every other model.

Everything in the database is derived from files under the warehouse root. So a refresh builds a
new database file next to the old one and renames it over it: a dashboard holding the old file
open read-only keeps reading a consistent snapshot, and the next connection sees the new one.

Dashboards (Superset, Metabase, Grafana) connect with :func:`sqlalchemy_url`, read-only. When the
root is an object store, the views name ``s3://...`` URLs: the reading process needs DuckDB's
``httpfs`` credentials (or an fsspec filesystem registered on its connection).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from warehouse.ab_mart import FILLERS
from warehouse.encode import empty_frame
from warehouse.layout import BATCHES_DIR, SCHEMA_DIR, join
from warehouse.manifest import BATCH_DATA_SCHEMA, MANIFEST_SCHEMA
from warehouse.store import Store

SQL_DIR = Path(__file__).with_name("sql")
DB_NAME = "warehouse.duckdb"

# placeholder in the SQL -> (files it reads, relative to the root; the columns when there are none)
_SOURCES: dict[str, tuple[str, pl.Schema]] = {
    "raw_rewards": ("rewards", empty_frame("rewards").schema),
    "raw_events": ("events", empty_frame("events").schema),
    "raw_rollouts": ("rollouts", empty_frame("rollouts").schema),
    "raw_late": ("late", empty_frame("late").schema),
    "raw_dlq": ("dlq", empty_frame("dlq").schema),
    "raw_checkpoints": ("checkpoints", empty_frame("checkpoints").schema),
    "batch_manifest": (join(BATCHES_DIR, "manifest"), MANIFEST_SCHEMA),
    "batch_data": (join(BATCHES_DIR, "data"), BATCH_DATA_SCHEMA),
}


@dataclass(frozen=True)
class Model:
    """One staging view or mart, as its SQL file declares it."""

    name: str
    materialized: str
    grain: str
    keys: tuple[str, ...]
    checks: tuple[str, ...]
    sql: str


def _header(sql: str, field: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(rf"^-- {field}: (.*)$", sql, re.MULTILINE)]


def load_models() -> list[Model]:
    """Every model of ``warehouse/sql``, in build order.

    >>> [m.name for m in load_models()][:3]
    ['stg_rewards', 'stg_events', 'stg_rollouts']
    >>> next(m for m in load_models() if m.name == "rewards").keys
    ('org_id', 'interaction_id')
    """
    models = []
    for path in sorted(SQL_DIR.glob("*.sql")):
        sql = path.read_text(encoding="utf-8")
        name = path.stem.split("_", 1)[1]
        keys = _header(sql, "keys")
        models.append(Model(
            name=name,
            materialized=(_header(sql, "materialized") or ["view"])[0].split()[0],
            grain=(_header(sql, "grain") or [""])[0],
            keys=tuple(k.strip() for k in keys[0].split(",")) if keys else (),
            checks=tuple(_header(sql, "check")),
            sql=sql,
        ))  # fmt: skip
    return models


def default_db(store: Store) -> str:
    """Next to the data on a local root; in the working folder when the root is remote."""
    return store.path(DB_NAME) if store.local else os.path.abspath(DB_NAME)


def _source_sql(store: Store, placeholder: str) -> str:
    """The files of a dataset read together with an empty file of today's columns: a column
    added since older files were written (the reward record's ``n_tool_calls``) reads as NULL
    in their rows, even when every file is older. The empty file is named by a digest of the
    columns, so one written for other columns is never taken for it."""
    folder, schema = _SOURCES[placeholder]
    digest = hashlib.sha256(repr(list(schema.items())).encode()).hexdigest()[:12]
    stub = join(SCHEMA_DIR, f"{placeholder}-{digest}.parquet")
    if not store.exists(stub):
        store.write_parquet(stub, pl.DataFrame(schema=schema))
    if next(store.files(folder), None) is None:
        return f"read_parquet('{store.url(stub)}')"
    glob = store.url(join(folder, "**", "*.parquet"))
    return (f"read_parquet(['{store.url(stub)}', '{glob}'], union_by_name = true, "
            "hive_partitioning = false)")  # fmt: skip


def connect(store: Store, db: str | None = None,
            read_only: bool = False) -> duckdb.DuckDBPyConnection:  # fmt: skip
    con = duckdb.connect(db or ":memory:", read_only=read_only)
    con.execute("SET enable_progress_bar = false")
    if not store.local:
        con.register_filesystem(store.fs)
    return con


def build_catalog(store: Store, db: str | None = None) -> str:
    """(Re)build every model into a fresh database file, then swap it in. Returns its path."""
    target = db or default_db(store)
    tmp = f"{target}.building-{os.getpid()}"
    for leftover in (tmp, f"{tmp}.wal"):
        if os.path.exists(leftover):
            os.remove(leftover)
    con = connect(store, tmp)
    try:
        build_into(con, store)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(tmp, target)
    return target


def build_into(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Run every model on an open connection (an in-memory one in tests and benchmarks)."""
    sources = {name: _source_sql(store, name) for name in _SOURCES}
    for model in load_models():
        run_model(con, model, sources)


def run_model(con: duckdb.DuckDBPyConnection, model: Model,
              sources: dict[str, str] | None = None) -> None:  # fmt: skip
    """(Re)build one model: its SQL with the sources filled in, then its Python filler if any."""
    sql = model.sql
    for name, source in (sources or {}).items():
        sql = sql.replace("{" + name + "}", source)
    con.execute(sql)
    fill = FILLERS.get(model.name)
    if fill is not None:
        fill(con)


def check_models(con: duckdb.DuckDBPyConnection) -> Iterator[str]:
    """Every broken key or invariant, as a sentence; nothing when the catalog is sound."""
    for model in load_models():
        if model.keys:
            cols = ", ".join(model.keys)
            nulls = " OR ".join(f"{k} IS NULL" for k in model.keys)
            dup = _count(con, f"SELECT count(*) FROM (SELECT {cols} FROM {model.name} "
                              f"GROUP BY ALL HAVING count(*) > 1)")  # fmt: skip
            null = _count(con, f"SELECT count(*) FROM {model.name} WHERE {nulls}")
            if dup:
                yield f"{model.name}: {dup} duplicate key(s) on ({cols})"
            if null and not model.name.startswith("stg_"):
                yield f"{model.name}: {null} row(s) with a null key"
        for check in model.checks:
            bad = _count(con, f"SELECT count(*) FROM ({check})")
            if bad:
                yield f"{model.name}: {bad} row(s) break: {check}"


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    """The one value of a ``SELECT count(*)`` query (an aggregate always returns one row)."""
    row = con.execute(sql).fetchone()
    assert row is not None
    return row[0]


def sqlalchemy_url(db_path: str) -> str:
    """The read-only SQLAlchemy URL (duckdb-engine dialect) for dashboards.

    >>> sqlalchemy_url("/srv/wh/warehouse.duckdb")
    'duckdb:////srv/wh/warehouse.duckdb?access_mode=read_only'
    """
    return f"duckdb:///{os.path.abspath(db_path)}?access_mode=read_only"
