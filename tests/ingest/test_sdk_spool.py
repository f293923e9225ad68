"""Both spools honour the same Protocol; the SQLite one also survives being reopened."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.sdk import MemorySpool, Spool, SqliteSpool
from ingest.sdk.spool import ENTRY_OVERHEAD_BYTES


def spools(tmp_path: Path, max_events: int, max_bytes: int) -> list[Spool]:
    return [
        MemorySpool(max_events, max_bytes),
        SqliteSpool(tmp_path / "spool.sqlite", max_events, max_bytes),
    ]


@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "sqlite"])
def test_batch_is_offered_again_until_acked(tmp_path: Path, kind: int) -> None:
    spool = spools(tmp_path, 100, 10_000)[kind]
    spool.add([b"e%d" % n for n in range(10)])
    batch = spool.next_batch(4, 10_000)
    assert batch.events == (b"e0", b"e1", b"e2", b"e3")
    spool.ack(batch, retry=True)
    assert spool.next_batch(4, 10_000) == batch
    spool.ack(batch, retry=False)
    assert spool.size() == 6
    assert spool.next_batch(100, 10_000).events[0] == b"e4"
    spool.close()


@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "sqlite"])
def test_byte_bound_drops_the_oldest(tmp_path: Path, kind: int) -> None:
    per_event = 10 + (ENTRY_OVERHEAD_BYTES if kind == 0 else 0)  # the memory spool counts more
    spool = spools(tmp_path, 100, 3 * per_event)[kind]
    assert spool.add([b"0123456789"] * 2) == 0
    assert spool.add([b"abcdefghij", b"klmnopqrst"]) == 1  # 4 do not fit: the oldest goes
    assert spool.next_batch(10, 1000).events == (b"0123456789", b"abcdefghij", b"klmnopqrst")
    spool.close()


@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "sqlite"])
def test_count_bound_drops_the_oldest(tmp_path: Path, kind: int) -> None:
    spool = spools(tmp_path, 5, 10**6)[kind]
    assert spool.add([b"a", b"b", b"c"]) == 0
    assert spool.add([b"x%d" % n for n in range(6)]) == 4  # 9 events > 5
    assert spool.next_batch(10, 1000).events == (b"x1", b"x2", b"x3", b"x4", b"x5")
    assert spool.size() == 5
    spool.close()


@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "sqlite"])
def test_byte_cap_of_a_batch_keeps_at_least_one(tmp_path: Path, kind: int) -> None:
    spool = spools(tmp_path, 100, 10_000)[kind]
    spool.add([b"a" * 50, b"b" * 50, b"c" * 50])
    assert len(spool.next_batch(10, 120)) == 2
    assert len(spool.next_batch(10, 10)) == 1
    spool.close()


def test_acking_a_batch_dropped_meanwhile_is_harmless(tmp_path: Path) -> None:
    for spool in spools(tmp_path, 2, 1000):
        spool.add([b"a", b"b"])
        batch = spool.next_batch(2, 1000)
        spool.add([b"c", b"d"])  # drops a and b while they are in flight
        spool.ack(batch, retry=False)
        assert spool.next_batch(10, 1000).events == (b"c", b"d")
        spool.close()


def test_sqlite_spool_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "spool.sqlite"
    first = SqliteSpool(path, 100, 10_000)
    first.add([b"kept-1", b"kept-2", b"sent"])
    first.ack(first.next_batch(1, 10_000), retry=False)  # "kept-1" acknowledged
    first.close()
    second = SqliteSpool(path, 100, 10_000)
    assert second.size() == 2
    assert second.next_batch(10, 10_000).events == (b"kept-2", b"sent")
    second.close()
