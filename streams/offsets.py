"""The input's offsets must arrive without holes: a guard that notices when they do not. Pure.

Around a rebalance Faust 0.15.3 can drop a message it had already fetched (its fetcher gives up
delivering while flow is suspended, yet moves its read offset past it), and its commit logic
accepts an acked offset one above the committed one, so the dropped message is committed without
ever being processed (cf. faust-streaming #216/#221). Nothing in Faust notices; this guard does.

Per consumer generation, each partition's messages must start at the offset the consumer was
sought to (the committed offset, or the log start; for a partition the worker kept through the
rebalance, at the latest where it had got to) and then follow one another. A message past
the expected offset is a *hole*: the worker acks nothing of it and restarts, and the fresh
consumer reads again from the committed offset, which is at or before the hole because nothing
past it was acked. Messages older than expected are redeliveries, harmless to the idempotent
processor.

A hole that a fresh process meets again at the same place is not a dropped message but a real
gap in the log (a transaction marker, compaction), which no rereading can fill; the worker
records holes it restarted for (:class:`HoleLog`) and accepts one it meets a second time.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path


class Verdict(enum.Enum):
    next = "next"  # the expected offset
    redelivered = "redelivered"  # below it: processed before, processing again is harmless
    hole = "hole"  # above it: messages in between were never seen


@dataclass(frozen=True, slots=True)
class Hole:
    partition: int
    expected: int
    found: int

    def __str__(self) -> str:
        return f"partition {self.partition}: expected offset {self.expected}, got {self.found}"


class OffsetGuard:
    """Expected next offsets of one consumer generation.

    >>> guard = OffsetGuard()
    >>> guard.begin(7, {0: 100})
    >>> [guard.check(0, o).value for o in (100, 101, 99, 102)]
    ['next', 'next', 'redelivered', 'next']
    >>> guard.check(0, 105).value, guard.hole_at(0, 105)
    ('hole', Hole(partition=0, expected=103, found=105))
    >>> guard.accept_gap(0, 105); guard.check(0, 106).value
    'next'
    """

    def __init__(self) -> None:
        self.generation: int | None = None
        self._expected: dict[int, int] = {}

    def begin(self, generation: int, starts: dict[int, int]) -> None:
        """Partitions start where the consumer was sought to; a new generation forgets the
        old one's partitions."""
        if generation != self.generation:
            self.generation, self._expected = generation, {}
        self._expected.update(starts)

    def knows(self, generation: int, partition: int) -> bool:
        return generation == self.generation and partition in self._expected

    def check(self, partition: int, offset: int) -> Verdict:
        """Classify one message; advance on the expected one. A hole changes nothing."""
        expected = self._expected[partition]
        if offset == expected:
            self._expected[partition] = offset + 1
            return Verdict.next
        return Verdict.redelivered if offset < expected else Verdict.hole

    def hole_at(self, partition: int, offset: int) -> Hole:
        return Hole(partition, self._expected[partition], offset)

    def accept_gap(self, partition: int, offset: int) -> None:
        """A gap known to be real: continue from ``offset`` as if it were expected."""
        self._expected[partition] = offset + 1


class HoleLog:
    """Holes this worker restarted for, kept in its data directory across restarts.

    >>> import tempfile
    >>> log = HoleLog(Path(tempfile.mkdtemp()) / "holes.json")
    >>> hole = Hole(3, 10, 12)
    >>> log.seen_before(hole)
    False
    >>> log.remember(hole); HoleLog(log.path).seen_before(hole)
    True
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> list[list[int]]:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return []

    def seen_before(self, hole: Hole) -> bool:
        return [hole.partition, hole.expected, hole.found] in self._load()

    def remember(self, hole: Hole, keep: int = 100) -> None:
        holes = self._load()[-(keep - 1) :] + [[hole.partition, hole.expected, hole.found]]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(holes))
        tmp.replace(self.path)
