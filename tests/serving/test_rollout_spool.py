"""The disk spool on a real folder: a segment leaves the disk only once every record in it is
confirmed, a torn tail or a bad checksum left by a crash costs only the records from there on
(counted, and cut off once), a file of another format is set aside, one process at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.rollouts.spool import (
    BAD_CHECKSUM,
    BAD_MAGIC,
    TORN_TAIL,
    RolloutSpool,
    SpoolInUse,
)

RECORDS = [(f"i-{n}".encode(), b'{"n": %d}' % n) for n in range(5)]


def segments(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.seg"))


def test_a_segment_is_deleted_once_every_record_in_it_is_confirmed(tmp_path: Path) -> None:
    spool = RolloutSpool(tmp_path, roll_s=0.0)
    first = spool.append(RECORDS[:2])
    spool.tick()  # sealed (older than roll_s), but two records unconfirmed
    second = spool.append(RECORDS[2:])
    assert first != second and len(segments(tmp_path)) == 2
    spool.confirm(first)
    assert len(segments(tmp_path)) == 2  # one of its two records still waits for Kafka
    spool.confirm(first)
    assert [p.stem for p in segments(tmp_path)] == [f"{second:020d}"]
    for _ in RECORDS[2:]:
        spool.confirm(second)
    assert len(segments(tmp_path)) == 1  # still open: deleted when sealed
    spool.tick()
    assert segments(tmp_path) == [] and spool.counts().disk_bytes == 0
    spool.close()


def test_what_a_process_left_is_found_in_order_by_the_next(tmp_path: Path) -> None:
    spool = RolloutSpool(tmp_path, roll_s=0.0)
    spool.append(RECORDS[:2])
    spool.tick()
    spool.append(RECORDS[2:])
    spool.close()  # nothing confirmed: everything stays
    again = RolloutSpool(tmp_path)
    found = again.recover()
    assert [(k, v) for k, v, _ in found] == RECORDS
    assert again.counts().recovered == 5 and again.counts().discarded == {}
    for _, _, segment in found:
        again.confirm(segment)
    assert segments(tmp_path) == []
    later = again.append(RECORDS[:1])  # numbering goes on after what was found
    assert later > max(segment for _, _, segment in found)
    again.close()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[:-3], TORN_TAIL),  # the process died while writing the last record
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), BAD_CHECKSUM),  # a flipped bit
    ],
)
def test_a_damaged_tail_costs_only_the_records_from_it_on(tmp_path: Path, damage,  # noqa: ANN001
                                                          reason: str) -> None:  # fmt: skip
    spool = RolloutSpool(tmp_path)
    spool.append(RECORDS)
    spool.close()
    (path,) = segments(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(damage(whole))
    again = RolloutSpool(tmp_path)
    assert [(k, v) for k, v, _ in again.recover()] == RECORDS[:4]
    counted = again.counts().discarded
    assert list(counted) == [reason] and 0 < counted[reason] < len(whole) // 4
    again.close()
    third = RolloutSpool(tmp_path)  # the damage was cut off: found once, counted once
    assert len(third.recover()) == 4 and third.counts().discarded == {}
    third.close()


def test_a_file_of_another_format_is_set_aside_not_deleted(tmp_path: Path) -> None:
    (tmp_path / f"{7:020d}.seg").write_bytes(b"PAR1 not a spool segment")
    spool = RolloutSpool(tmp_path)
    assert spool.recover() == []
    assert spool.counts().discarded == {BAD_MAGIC: 24}
    assert (tmp_path / f"{7:020d}.unreadable").exists()
    spool.close()


def test_one_process_at_a_time(tmp_path: Path) -> None:
    spool = RolloutSpool(tmp_path)
    with pytest.raises(SpoolInUse, match="in use by another process"):
        RolloutSpool(tmp_path)
    spool.close()
    RolloutSpool(tmp_path).close()  # released with the first
