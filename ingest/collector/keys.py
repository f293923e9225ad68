"""API keys, one tenant each, stored hashed in a small SQLite file.

A key is ``rtrl_`` + 32 random bytes (url-safe base64): only its sha256 is kept, so a copy of the
file grants nothing. Keys have enough entropy that an unsalted fast hash is the right tool (a slow
password hash would cost every request). ``lookup`` caches hits briefly; misses always ask the
file, so a key created while the collector runs works at once.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
import time
from pathlib import Path

KEY_PREFIX = "rtrl_"
CACHE_TTL_S = 30.0
"""How long a revoked key may still work in a running collector."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_sha256 TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
)
"""


def hash_key(key: str) -> str:
    """
    >>> hash_key("rtrl_abc")[:16]
    '86778e5061df17c5'
    """
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, float]] = {}

    def create(self, org_id: str) -> str:
        """A new key for ``org_id``; the only time the key itself is known."""
        if not org_id or len(org_id) > 128:
            raise ValueError("org_id must be 1..128 characters")
        key = new_key()
        with self._lock:
            self._db.execute("INSERT INTO api_keys (key_sha256, org_id, created_at) "
                             "VALUES (?, ?, ?)", (hash_key(key), org_id, time.time()))
        return key

    def revoke(self, key: str) -> bool:
        with self._lock:
            cur = self._db.execute("UPDATE api_keys SET revoked = 1 WHERE key_sha256 = ?",
                                   (hash_key(key),))
            self._cache.pop(hash_key(key), None)
        return cur.rowcount > 0

    def lookup(self, key: str) -> tuple[str, str] | None:
        """``(key_id, org_id)`` of a valid key, else None; ``key_id`` is the hash (loggable)."""
        if not key.startswith(KEY_PREFIX):
            return None
        digest = hash_key(key)
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[1] > now:
            return digest, hit[0]
        with self._lock:
            row = self._db.execute("SELECT org_id FROM api_keys WHERE key_sha256 = ? "
                                   "AND revoked = 0", (digest,)).fetchone()
        if row is None:
            return None
        self._cache[digest] = (row[0], now + CACHE_TTL_S)
        return digest, row[0]

    def close(self) -> None:
        self._db.close()
