"""API keys, one tenant each, stored hashed in a small SQLite file; the bearer scheme that
carries them. Shared by the collector and the gateway, which both take a tenant's key.

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
from dataclasses import dataclass
from pathlib import Path

DEFAULT_KEY_DB = Path(".rtrl/keys.sqlite")
KEY_PREFIX = "rtrl_"
KEY_ID_CHARS = 12
"""A key's id, as listed: the first hex digits of its sha256."""
MIN_ID_CHARS = 8
CACHE_TTL_S = 30.0
"""How long a revoked key may still work in a running collector."""
BUSY_TIMEOUT_S = 10.0
"""How long opening the file waits for another process's lock on it."""

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


def bearer(header: str | None) -> str:
    """The key an ``Authorization`` header carries ("" when it carries none).

    >>> bearer("Bearer rtrl_x "), bearer("Basic abc"), bearer(None)
    ('rtrl_x', '', '')
    """
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


BEARER_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "an API key from `rtrl keys create --org ORG`",
}
"""The OpenAPI security scheme of every API that takes these keys (named ``bearer``)."""


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _open(path: Path) -> sqlite3.Connection:
    """The file, in WAL mode and with its table, however many processes open it at once.

    Why the loop: SQLite does not wait for a lock before it switches a file to WAL. The
    collector's forked workers each open a new key file at once; the one that came second
    found the first's lock, failed with "database is locked" and stopped the collector, in
    about one start of a hundred.
    """
    db = sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S
    )
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                db.close()
                raise
            time.sleep(0.02)
    db.execute(_SCHEMA)
    return db


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    org_id: str
    created_at: float  # seconds since the epoch
    revoked: bool


class KeyStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = _open(path)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, float]] = {}

    def create(self, org_id: str) -> str:
        """A new key for ``org_id``; the only time the key itself is known."""
        if not org_id or len(org_id) > 128:
            raise ValueError("org_id must be 1..128 characters")
        key = new_key()
        with self._lock:
            self._db.execute(
                "INSERT INTO api_keys (key_sha256, org_id, created_at) VALUES (?, ?, ?)",
                (hash_key(key), org_id, time.time()),
            )
        return key

    def revoke(self, key: str) -> bool:
        with self._lock:
            cur = self._db.execute(
                "UPDATE api_keys SET revoked = 1 WHERE key_sha256 = ?", (hash_key(key),)
            )
            self._cache.pop(hash_key(key), None)
        return cur.rowcount > 0

    def revoke_id(self, key_id: str) -> KeyInfo:
        """Revoke the one key whose id starts with ``key_id`` (at least 8 hex digits, as
        listed). Running collectors stop accepting it within ``CACHE_TTL_S``."""
        key_id = key_id.strip().lower()
        if len(key_id) < MIN_ID_CHARS or any(c not in "0123456789abcdef" for c in key_id):
            raise ValueError(f"a key id is at least {MIN_ID_CHARS} hex digits, as listed")
        with self._lock:
            rows = self._db.execute(
                "SELECT key_sha256, org_id, created_at FROM api_keys WHERE key_sha256 LIKE ?",
                (key_id + "%",),
            ).fetchall()
            if len(rows) != 1:
                raise LookupError(f"{len(rows)} keys have an id starting with {key_id}")
            digest, org_id, created_at = rows[0]
            self._db.execute("UPDATE api_keys SET revoked = 1 WHERE key_sha256 = ?", (digest,))
            self._cache.pop(digest, None)
        return KeyInfo(digest[:KEY_ID_CHARS], org_id, created_at, True)

    def list(self) -> list[KeyInfo]:
        """Every key (never the key itself: its id), oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key_sha256, org_id, created_at, revoked FROM api_keys ORDER BY created_at"
            ).fetchall()
        return [
            KeyInfo(d[:KEY_ID_CHARS], org, created, bool(revoked))
            for d, org, created, revoked in rows
        ]

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
            row = self._db.execute(
                "SELECT org_id FROM api_keys WHERE key_sha256 = ? AND revoked = 0", (digest,)
            ).fetchone()
        if row is None:
            return None
        self._cache[digest] = (row[0], now + CACHE_TTL_S)
        return digest, row[0]

    def close(self) -> None:
        self._db.close()
