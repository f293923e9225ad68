"""`rtrl forget --user-id X`: no row of the user stays in any warehouse file or table.

The order matters:

1. find the user's interactions (their rewards and events name them);
2. add the user and those interactions to the forgotten list, so a sink or batch build running
   meanwhile drops their rows from now on;
3. ``erase`` those interactions outside the warehouse (the CLI sends a tombstone per interaction
   to the compacted ``rewards`` topic, ``warehouse.tombstones``), before any file changes, so
   that if it fails nothing is lost: running ``forget`` again finds the same interactions;
4. rewrite (atomically, same name) every Parquet file holding one of their rows, or delete it
   when nothing else is left, batches and quarantine included; scrub validation reports;
5. rebuild the DuckDB catalog from the files, which replaces the old database file.

Privacy-mode interactions hold no ``user_id`` anywhere, so nothing ties them to the user.
The warehouse's ``late`` dataset is scrubbed like ``events``. Its ``dlq`` dataset is not: it keeps
rejected bytes as they came, which need not parse, so no column names a user. A user's rejected
events stay there until removed by hand (``telemetry.dlq`` itself deletes them after 14 days).
``telemetry.events`` and ``telemetry.late`` keep the user's events until their retention (7 days
by default) deletes them; the stream worker's state keeps an interaction's copies until it is
closed and purged (``t_close + R + grace``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import polars as pl

from warehouse.catalog import build_catalog
from warehouse.layout import BATCHES_DIR, DATASETS, QUARANTINE_DIR
from warehouse.privacy import add_forgotten
from warehouse.store import Store

log = logging.getLogger(__name__)

_SCANNED = (*DATASETS, BATCHES_DIR, QUARANTINE_DIR)
REDACTED = "<forgotten>"


@dataclass(frozen=True)
class ForgetResult:
    interactions: int
    files_rewritten: int
    rows_removed: int
    erased: int = 0
    """What ``erase`` reported (tombstones sent)."""


class _Scanner:
    """DuckDB over each scanned folder's Parquet files: which files hold whose rows."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.con = duckdb.connect()
        if not store.local:
            self.con.register_filesystem(store.fs)
        self.sources: dict[str, set[str]] = {}  # read_parquet(...) -> its columns
        for folder in _SCANNED:
            if next(store.files(folder), None) is None:
                continue
            glob = store.url(f"{folder}/**/*.parquet")
            source = f"read_parquet('{glob}', union_by_name = true, filename = true)"
            self.sources[source] = {row[0] for row in self.con.execute(
                f"DESCRIBE SELECT * FROM {source}").fetchall()}  # fmt: skip

    def interactions_of(self, user_id: str) -> set[str]:
        found: set[str] = set()
        for source, cols in self.sources.items():
            if {"user_id", "interaction_id"} <= cols:
                found |= {
                    row[0]
                    for row in self.con.execute(
                        f"SELECT DISTINCT interaction_id FROM {source} "
                        "WHERE user_id = ? AND interaction_id IS NOT NULL",
                        [user_id],
                    ).fetchall()
                }
        return found

    def files_with(self, user_id: str, interactions: set[str]) -> list[str]:
        prefix = self.store.url("").rstrip("/") + "/"
        hits: set[str] = set()
        for source, cols in self.sources.items():
            conditions = []
            if "user_id" in cols:
                conditions.append("user_id = $user")
            if "interaction_id" in cols:
                conditions.append("list_contains($ids, interaction_id)")
            if not conditions:
                continue
            params = {"user": user_id, "ids": sorted(interactions)}
            params = {k: v for k, v in params.items() if f"${k}" in " ".join(conditions)}
            hits |= {row[0] for row in self.con.execute(
                f"SELECT DISTINCT filename FROM {source} WHERE {' OR '.join(conditions)}",
                params).fetchall()}  # fmt: skip
        return sorted(h[len(prefix) :] if h.startswith(prefix) else h for h in hits)

    def close(self) -> None:
        self.con.close()


def _scrub_file(store: Store, relative: str, user_id: str, interactions: set[str]) -> int:
    frame = store.read_parquet(relative)
    mine = pl.lit(False)
    if "user_id" in frame.columns:
        mine = mine | (pl.col("user_id") == user_id).fill_null(False)
    if "interaction_id" in frame.columns:
        mine = mine | pl.col("interaction_id").is_in(list(interactions)).fill_null(False)
    removed = frame.filter(mine).height
    if removed:
        kept = frame.filter(~mine)
        if kept.height:
            store.write_parquet(relative, kept)
        else:
            store.remove(relative)
    return removed


def _scrub_reports(store: Store, needles: set[str]) -> None:
    for relative in [*store.files(QUARANTINE_DIR, ".json"), *store.files(BATCHES_DIR, ".json")]:
        text = (store.read_bytes(relative) or b"").decode()
        scrubbed = text
        for needle in needles:
            scrubbed = scrubbed.replace(needle, REDACTED)
        if scrubbed != text:
            store.write_bytes(relative, scrubbed.encode())


def forget(store: Store, user_id: str, db: str | None = None,
           erase: Callable[[set[str]], int] | None = None) -> ForgetResult:  # fmt: skip
    if not user_id:
        raise ValueError("an empty user id names nobody")
    scanner = _Scanner(store)
    try:
        interactions = scanner.interactions_of(user_id)
        add_forgotten(store, user_id, interactions)
        files = scanner.files_with(user_id, interactions)
    finally:
        scanner.close()
    erased = erase(interactions) if erase is not None and interactions else 0
    removed = sum(_scrub_file(store, relative, user_id, interactions) for relative in files)
    _scrub_reports(store, {user_id, *interactions})
    build_catalog(store, db)
    log.info("forgot %s: %d rows in %d files", user_id, removed, len(files))
    return ForgetResult(len(interactions), len(files), removed, erased)
