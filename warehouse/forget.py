"""`rtrl forget --org O --user-id X`: no row of the user stays in any warehouse file or table.

A user is ``(org_id, user_id)`` and an interaction ``(org_id, interaction_id)``: another
organisation's same user id, and its interactions, stay, even where their ids are the same.
Datasets without ``org_id`` (rollouts) cannot tell them apart: there a forgotten interaction's id
is removed whatever its organisation. Validation reports are text: every mention of the user's
id and their interactions' ids is redacted there.

The order matters:

1. find the user's interactions (their rewards and events name them);
2. add the user and those interactions to the forgotten list, so a sink or batch build running
   meanwhile drops their rows from now on;
3. ``erase`` those interactions outside the warehouse (the CLI sends tombstones, under the keys
   ``tombstone_keys`` gives, to the compacted ``rewards`` topic, ``warehouse.tombstones``), before
   any file changes, so
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
from typing import Any

import duckdb

from rewards.tenant_keys import rewards_key
from warehouse.catalog import build_catalog
from warehouse.encode import Forgotten
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
    shared_ids: int = 0
    """Interactions whose id another organisation also uses: no bare-key tombstone for them."""


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

    def _query(self, sql: str, params: dict[str, object]) -> set[Any]:
        return {row[0] for row in self.con.execute(sql, params).fetchall()}

    def interactions_of(self, org_id: str, user_id: str) -> set[str]:
        """The ids of the user's interactions, in the user's organisation."""
        found: set[str] = set()
        for source, cols in self.sources.items():
            if {"user_id", "interaction_id"} <= cols:
                same_org = "org_id = $org AND " if "org_id" in cols else ""
                found |= self._query(
                    f"SELECT DISTINCT interaction_id FROM {source} WHERE {same_org}"
                    "user_id = $user AND interaction_id IS NOT NULL",
                    {"user": user_id, **({"org": org_id} if same_org else {})},
                )
        return found

    def interactions_of_org(self, org_id: str) -> set[str]:
        """The ids of every interaction of the organisation."""
        found: set[str] = set()
        for source, cols in self.sources.items():
            if {"org_id", "interaction_id"} <= cols:
                found |= self._query(
                    f"SELECT DISTINCT interaction_id FROM {source} WHERE org_id = $org "
                    "AND interaction_id IS NOT NULL",
                    {"org": org_id},
                )
        return found

    def users_of_org(self, org_id: str) -> set[str]:
        found: set[str] = set()
        for source, cols in self.sources.items():
            if {"org_id", "user_id"} <= cols:
                found |= self._query(f"SELECT DISTINCT user_id FROM {source} WHERE org_id = $org "
                                     "AND user_id IS NOT NULL", {"org": org_id})  # fmt: skip
        return found

    def files_of_org(self, org_id: str, interactions: set[str]) -> list[str]:
        """Every file holding a row of the organisation (by ``org_id``, or where a dataset has
        none, by one of its interactions' ids)."""
        prefix = self.store.url("").rstrip("/") + "/"
        hits: set[str] = set()
        for source, cols in self.sources.items():
            params: dict[str, object]
            if "org_id" in cols:
                where, params = "org_id = $org", {"org": org_id}
            elif "interaction_id" in cols:
                where, params = "list_contains($ids, interaction_id)", {"ids": sorted(interactions)}
            else:
                continue
            hits |= self._query(f"SELECT DISTINCT filename FROM {source} WHERE {where}", params)
        return sorted(h[len(prefix) :] if h.startswith(prefix) else h for h in hits)

    def used_elsewhere(self, org_id: str, interactions: set[str]) -> set[str]:
        """Those of ``interactions`` whose id another organisation's rows also use."""
        found: set[str] = set()
        for source, cols in self.sources.items():
            if {"org_id", "interaction_id"} <= cols:
                found |= self._query(
                    f"SELECT DISTINCT interaction_id FROM {source} WHERE "
                    "list_contains($ids, interaction_id) AND org_id IS DISTINCT FROM $org",
                    {"ids": sorted(interactions), "org": org_id},
                )
        return found

    def files_with(self, org_id: str, user_id: str, interactions: set[str]) -> list[str]:
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
            where = " OR ".join(conditions)
            if "org_id" in cols:
                where = f"org_id = $org AND ({where})"
            every: dict[str, object] = {"user": user_id, "ids": sorted(interactions), "org": org_id}
            params = {k: v for k, v in every.items() if f"${k}" in where}
            hits |= self._query(f"SELECT DISTINCT filename FROM {source} WHERE {where}", params)
        return sorted(h[len(prefix) :] if h.startswith(prefix) else h for h in hits)

    def close(self) -> None:
        self.con.close()


def _scrub_file(store: Store, relative: str, forgotten: Forgotten) -> int:
    frame = store.read_parquet(relative)
    mine = forgotten.matches(frame.columns)
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


def tombstone_keys(org_id: str, interactions: set[str], used_elsewhere: set[str]) -> set[str]:
    """The ``rewards`` keys to tombstone for one organisation's interactions.

    Each interaction's org-scoped key, and its bare key (records written before the topic was
    keyed by organisation) only where no other organisation's rows use the id: compaction kept
    one record of a bare key, whichever organisation's came last, so a tombstone under a shared
    bare key could erase another organisation's record.
    """
    scoped = {rewards_key(org_id, i).decode() for i in interactions}
    return scoped | (interactions - used_elsewhere)


def forget_org(store: Store, org_id: str, db: str | None = None,
               erase: Callable[[set[str]], int] | None = None) -> ForgetResult:  # fmt: skip
    """Forget a whole organisation: every row of it, in every file, and its records on the
    ``rewards`` topic through ``erase``; its rows arriving later are dropped by the sink and the
    batch builder. Another organisation's same user and interaction ids stay."""
    if not org_id:
        raise ValueError("an empty organisation id names nobody")
    scanner = _Scanner(store)
    try:
        interactions = scanner.interactions_of_org(org_id)
        users = scanner.users_of_org(org_id)
        shared = scanner.used_elsewhere(org_id, interactions) if interactions else set()
        add_forgotten(store, org_id, None, interactions)
        files = scanner.files_of_org(org_id, interactions)
    finally:
        scanner.close()
    forgotten = Forgotten(org_interactions=frozenset((org_id, i) for i in interactions),
                          orgs=frozenset({org_id}))  # fmt: skip
    keys = tombstone_keys(org_id, interactions, shared)
    erased = erase(keys) if erase is not None and keys else 0
    removed = sum(_scrub_file(store, relative, forgotten) for relative in files)
    _scrub_reports(store, {*users, *interactions} - {""})
    build_catalog(store, db)
    log.info("forgot the organisation %s: %d rows in %d files", org_id, removed, len(files))
    return ForgetResult(len(interactions), len(files), removed, erased, len(shared))


def forget(store: Store, org_id: str, user_id: str, db: str | None = None,
           erase: Callable[[set[str]], int] | None = None) -> ForgetResult:  # fmt: skip
    """Forget ``(org_id, user_id)``; ``erase`` gets the ``rewards`` keys to tombstone."""
    if not user_id or not org_id:
        raise ValueError("an empty user or organisation id names nobody")
    scanner = _Scanner(store)
    try:
        interactions = scanner.interactions_of(org_id, user_id)
        shared = scanner.used_elsewhere(org_id, interactions) if interactions else set()
        forgotten = Forgotten(frozenset(), frozenset(), frozenset({(org_id, user_id)}),
                              frozenset((org_id, i) for i in interactions))  # fmt: skip
        add_forgotten(store, org_id, user_id, interactions)
        files = scanner.files_with(org_id, user_id, interactions)
    finally:
        scanner.close()
    keys = tombstone_keys(org_id, interactions, shared)
    erased = erase(keys) if erase is not None and keys else 0
    removed = sum(_scrub_file(store, relative, forgotten) for relative in files)
    _scrub_reports(store, {user_id, *interactions})
    build_catalog(store, db)
    log.info("forgot %s of %s: %d rows in %d files", user_id, org_id, removed, len(files))
    return ForgetResult(len(interactions), len(files), removed, erased, len(shared))
