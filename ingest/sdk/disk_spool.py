"""A spool in one SQLite file (WAL mode): what the collector has not acknowledged survives a
collector outage and a crash (SIGKILL) of the editor process; the next process delivers it.

Each ``add`` is one transaction. With ``synchronous=NORMAL`` in WAL mode a committed write is in
the operating system's hands, which is what a process crash needs; ``durable_fsync=True`` syncs
every commit too (``FULL``), for power loss, at a cost per ``add``. Several processes may open the
same file (a forked child does): SQLite serialises them, and an event two of them send is a
duplicate the stream drops by ``event_id``.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from ingest.sdk.spool import SpoolBatch

# Running totals live in the file, updated in the same transaction as the rows, so every process
# sharing it sees the same bound and no ``add`` has to scan the table.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS spool (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    size INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS totals (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    events INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals VALUES (1, 0, 0);
"""

# Many rows per statement: one step, so the sqlite3 module releases and re-takes the GIL once
# per chunk rather than per row (per row, a busy emitting thread makes every re-take wait).
# Chunks are powers of two, so only a few distinct statements are ever compiled and cached.
# Two parameters a row; SQLite allows 999 parameters before 3.32.
_MAX_ROWS_PER_INSERT = 512 if sqlite3.sqlite_version_info >= (3, 32, 0) else 256


def _chunk_sizes(n: int) -> list[int]:
    """
    >>> sum(_chunk_sizes(1300)), all(n & (n - 1) == 0 for n in _chunk_sizes(1300))
    (1300, True)
    """
    sizes = []
    while n:
        size = min(_MAX_ROWS_PER_INSERT, 1 << (n.bit_length() - 1))
        sizes.append(size)
        n -= size
    return sizes


class SqliteSpool:
    """Bounded by count and bytes; over the bound the oldest rows are deleted in ``add``."""

    def __init__(
        self, path: Path, max_events: int, max_bytes: int, durable_fsync: bool = False
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._max_events = max_events
        self._max_bytes = max_bytes
        # Autocommit off by hand: every public method is one explicit transaction.
        self._db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable_fsync else 'NORMAL'}")
        self._db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")

    def add(self, events: list[bytes]) -> int:
        if not events:
            return 0
        with self._transaction():
            start = 0
            for size in _chunk_sizes(len(events)):
                chunk = events[start : start + size]
                start += size
                self._db.execute(_insert_statement(size), [v for e in chunk for v in (len(e), e)])
            self._count(len(events), sum(len(e) for e in events))
            return self._trim()

    def _trim(self) -> int:
        events, total = self._totals()
        if events <= self._max_events and total <= self._max_bytes:
            return 0
        # Walk from the oldest until what remains fits both bounds; drop what was walked.
        cutoff = None
        for row_id, size in self._db.execute("SELECT id, size FROM spool ORDER BY id"):
            events -= 1
            total -= size
            cutoff = row_id
            if events <= self._max_events and total <= self._max_bytes:
                break
        if cutoff is None:
            return 0
        dropped, dropped_bytes = self._db.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM spool WHERE id <= ?", (cutoff,)
        ).fetchone()
        self._db.execute("DELETE FROM spool WHERE id <= ?", (cutoff,))
        self._count(-dropped, -dropped_bytes)
        return int(dropped)

    def _count(self, events: int, size: int) -> None:
        self._db.execute("UPDATE totals SET events = events + ?, bytes = bytes + ?", (events, size))

    def _totals(self) -> tuple[int, int]:
        events, total = self._db.execute("SELECT events, bytes FROM totals").fetchone()
        return int(events), int(total)

    def next_batch(self, max_events: int, max_bytes: int) -> SpoolBatch:
        ids: list[int] = []
        events: list[bytes] = []
        total = 0
        for row_id, body in self._db.execute(
            "SELECT id, body FROM spool ORDER BY id LIMIT ?", (max_events,)
        ):
            if ids and total + len(body) > max_bytes:
                break
            ids.append(row_id)
            events.append(bytes(body))
            total += len(body)
        return SpoolBatch(tuple(ids), tuple(events))

    def ack(self, batch: SpoolBatch, retry: bool) -> None:
        if retry or not batch.ids:
            return
        with self._transaction():
            # Rows dropped for room meanwhile are already gone and already uncounted.
            placeholders = ",".join("?" * len(batch.ids))
            removed, removed_bytes = self._db.execute(
                f"SELECT count(*), coalesce(sum(size), 0) FROM spool WHERE id IN ({placeholders})",
                batch.ids,
            ).fetchone()
            self._db.execute(f"DELETE FROM spool WHERE id IN ({placeholders})", batch.ids)
            self._count(-removed, -removed_bytes)

    def size(self) -> int:
        return self._totals()[0]

    def close(self) -> None:
        self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


@functools.cache
def _insert_statement(rows: int) -> str:
    return "INSERT INTO spool (size, body) VALUES " + ",".join(["(?, ?)"] * rows)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK`` on error): one writer at a time."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
