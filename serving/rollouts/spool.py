"""Rollouts on disk until Kafka has acknowledged them, so that neither a broker outage nor a
killed gateway loses one (``serving.rollouts.recorder`` writes each burst here before the
producer gets it: write-ahead).

A folder of append-only segment files, ``<number>.seg``, numbered in the order they were
opened. A segment starts with ``MAGIC``; each record is a header (key length, value length,
CRC-32 of both lengths, the key and the value) and then the key and the value. Appends go to
the one open segment, a burst of records in one ``write``; with ``fsync`` each burst is
fsynced before it is handed on (and the folder when a segment is created), so a record survives
a power loss once the producer has it; without, it survives the gateway's SIGKILL (the kernel
holds the bytes) but not the machine's crash. The open segment is sealed after ``roll_s`` or
``segment_bytes``, and a sealed segment is deleted once every record in it is confirmed
(Kafka acknowledged it, or it was dropped for a counted reason), never before.

On start, the segments an earlier process left are read back in order (``recover``): a record
cut short by a crash (a torn tail) or failing its checksum ends what is read of that segment;
the rest of the file is cut off, and the bytes are counted by reason (``discarded``) and
logged. A segment that does not start with ``MAGIC`` is renamed ``*.unreadable`` and counted,
never deleted. One process at a time: the folder is locked (``flock``, released by the kernel
when the holder dies, SIGKILL included); a second gateway on it is refused.

Delivery from here is at least once: a record Kafka acknowledged whose segment was not yet
deleted when the gateway died is delivered again by the next start.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.durable import fsync_dir

log = logging.getLogger(__name__)

MAGIC = b"RTRLRS1\n"  # rollout spool, format 1
HEADER = struct.Struct("<III")  # key length, value length, CRC-32
SUFFIX = ".seg"
SEGMENT_BYTES = 8 << 20  # a segment is sealed past this size...
ROLL_S = 1.0  # ...or this age, so that delivered records leave the disk soon
TORN_TAIL = "torn_tail"  # a record cut short: the process died while writing it
BAD_CHECKSUM = "bad_checksum"  # a record whose bytes are not those written
BAD_MAGIC = "bad_magic"  # not a segment of this format: kept aside, unread
Record = tuple[bytes, bytes]  # key, value


class SpoolInUse(RuntimeError):
    """Another process holds the spool folder."""


def encode(records: Sequence[Record]) -> bytes:
    """Records framed for a segment.

    >>> decode(MAGIC + encode([(b"k", b"v"), (b"", b"{}")]))
    ([(b'k', b'v'), (b'', b'{}')], 36, None)
    """
    parts: list[bytes] = []
    for key, value in records:
        lengths = struct.pack("<II", len(key), len(value))
        crc = zlib.crc32(value, zlib.crc32(key, zlib.crc32(lengths)))
        parts += (lengths, struct.pack("<I", crc), key, value)
    return b"".join(parts)


def decode(data: bytes) -> tuple[list[Record], int, str | None]:
    """A segment's records, the length of its sound prefix, and what ended it early (None: the
    whole segment is sound).

    >>> whole = MAGIC + encode([(b"a", b"1"), (b"b", b"2")])
    >>> decode(whole[:-1])
    ([(b'a', b'1')], 22, 'torn_tail')
    >>> decode(whole[:-1] + b"3")
    ([(b'a', b'1')], 22, 'bad_checksum')
    >>> decode(b"PARQUET1")
    ([], 0, 'bad_magic')
    """
    if not data.startswith(MAGIC):
        return [], 0, BAD_MAGIC
    records: list[Record] = []
    at = len(MAGIC)
    while at < len(data):
        if at + HEADER.size > len(data):
            return records, at, TORN_TAIL
        key_len, value_len, crc = HEADER.unpack_from(data, at)
        start = at + HEADER.size
        end = start + key_len + value_len
        if end > len(data):
            return records, at, TORN_TAIL
        key, value = data[start : start + key_len], data[start + key_len : end]
        lengths = data[at : at + 8]
        if zlib.crc32(value, zlib.crc32(key, zlib.crc32(lengths))) != crc:
            return records, at, BAD_CHECKSUM
        records.append((key, value))
        at = end
    return records, at, None


@dataclass
class _Segment:
    number: int
    path: Path
    size: int
    opened_at: float
    written: int = 0  # records in it
    unconfirmed: int = 0  # of those, not yet acknowledged by Kafka (nor dropped)
    sealed: bool = False


@dataclass(frozen=True)
class SpoolCounts:
    """What the spool did, for the gateway's metrics."""

    disk_bytes: int  # every segment on disk now
    segments: int
    written: int  # records written since start
    recovered: int  # records found at start, left by an earlier process
    discarded: dict[str, int]  # bytes of unreadable records found at start, by reason


class RolloutSpool:
    def __init__(self, folder: Path, fsync: bool = True, segment_bytes: int = SEGMENT_BYTES,
                 roll_s: float = ROLL_S) -> None:  # fmt: skip
        self.folder = folder
        self.fsync = fsync
        self._segment_bytes = segment_bytes
        self._roll_s = roll_s
        folder.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock(folder)
        self._segments: dict[int, _Segment] = {}
        self._open: _Segment | None = None
        self._fd = -1
        self._mutex = threading.Lock()  # appends on one thread, confirmations on another
        self._left = sorted(int(p.stem) for p in folder.glob(f"*{SUFFIX}") if p.stem.isdigit())
        self._next = (self._left[-1] + 1) if self._left else 0
        self.written = 0
        self.recovered = 0
        self.discarded: Counter[str] = Counter()

    def recover(self) -> list[tuple[bytes, bytes, int]]:
        """The records earlier processes left, in the order they were written, each with its
        segment's number (to ``confirm``); called once, before the first ``append``."""
        out: list[tuple[bytes, bytes, int]] = []
        for number in self._left:
            path = self._path(number)
            data = path.read_bytes()
            records, sound, problem = decode(data)
            if problem == BAD_MAGIC:
                path.rename(path.with_suffix(".unreadable"))
                self._discard(path, BAD_MAGIC, len(data))
                continue
            if problem is not None:
                os.truncate(path, sound)  # counted once, not at every later start
                self._discard(path, problem, len(data) - sound)
            segment = _Segment(number, path, sound, time.monotonic(), len(records), len(records),
                               sealed=True)  # fmt: skip
            self._segments[number] = segment
            out += [(key, value, number) for key, value in records]
            if not records:
                self._delete(segment)
        self._left = []
        self.recovered = len(out)
        if out:
            log.info("%d rollouts found in %s, left by an earlier run", len(out), self.folder)
        return out

    def append(self, records: Sequence[Record]) -> int:
        """Write ``records`` (fsynced with ``fsync``); returns their segment's number. An
        ``OSError`` (a full disk) leaves the segment as it was before the call."""
        blob = encode(records)
        with self._mutex:
            segment = self._open
            if segment is None or segment.size >= self._segment_bytes:
                segment = self._open_next()
            _write_all(self._fd, blob, segment.size)
            if self.fsync:
                os.fsync(self._fd)
            segment.size += len(blob)
            segment.written += len(records)
            segment.unconfirmed += len(records)
            self.written += len(records)
            return segment.number

    def confirm(self, number: int) -> None:
        """One record of segment ``number`` is done with (acknowledged, or dropped and
        counted); a sealed segment whose records are all done is deleted."""
        with self._mutex:
            segment = self._segments[number]
            segment.unconfirmed -= 1
            if segment.sealed and segment.unconfirmed == 0:
                self._delete(segment)

    def tick(self) -> None:
        """Seal the open segment once it is ``roll_s`` old (then deleted when done with)."""
        with self._mutex:
            segment = self._open
            if segment is not None and time.monotonic() - segment.opened_at >= self._roll_s:
                self._seal()

    def counts(self) -> SpoolCounts:
        with self._mutex:
            return SpoolCounts(
                disk_bytes=sum(s.size for s in self._segments.values()),
                segments=len(self._segments),
                written=self.written,
                recovered=self.recovered,
                discarded=dict(self.discarded),
            )

    def unconfirmed(self) -> int:
        with self._mutex:
            return sum(s.unconfirmed for s in self._segments.values())

    def close(self) -> None:
        """Seal the open segment (deleted when done with) and let go of the folder; what is not
        confirmed stays for the next start."""
        with self._mutex:
            if self._open is not None:
                self._seal()
        os.close(self._lock_fd)

    def _open_next(self) -> _Segment:
        """Seal the open segment, if any, and open the next one (the caller holds the mutex)."""
        if self._open is not None:
            self._seal()
        number, self._next = self._next, self._next + 1
        path = self._path(number)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        _write_all(self._fd, MAGIC, 0)
        if self.fsync:
            os.fsync(self._fd)
            fsync_dir(self.folder)  # the new name survives a power loss too
        segment = _Segment(number, path, len(MAGIC), time.monotonic())
        self._segments[number] = self._open = segment
        return segment

    def _seal(self) -> None:
        assert self._open is not None
        segment, self._open = self._open, None
        os.close(self._fd)
        self._fd = -1
        segment.sealed = True
        if segment.unconfirmed == 0:
            self._delete(segment)

    def _delete(self, segment: _Segment) -> None:
        segment.path.unlink(missing_ok=True)
        self._segments.pop(segment.number, None)

    def _discard(self, path: Path, reason: str, n_bytes: int) -> None:
        self.discarded[reason] += n_bytes
        log.warning("%s: %d bytes unreadable (%s), the records before them kept", path, n_bytes,
                    reason)  # fmt: skip

    def _path(self, number: int) -> Path:
        return self.folder / f"{number:020d}{SUFFIX}"


def _write_all(fd: int, data: bytes, at: int) -> None:
    """Write ``data`` at offset ``at``; on an error the file is cut back to ``at``, so that a
    failed burst leaves no partial record behind a later one."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.pwrite(fd, view, at + len(data) - len(view)) :]
    except OSError:
        os.ftruncate(fd, at)
        raise


def _lock(folder: Path) -> int:
    fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        message = f"rollout spool {folder} is in use by another process (pid {holder})"
        raise SpoolInUse(message) from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
