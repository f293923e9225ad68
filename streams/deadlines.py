"""When the open interactions of a partition next need attention, in bounded memory.

The processor must find the interactions whose deadline its clock has passed without scanning its
state on every step. A heap of every open interaction's deadline does that, but costs ~180 bytes
of memory per open interaction: a partition with millions open would hold hundreds of MB while its
state itself sits on disk. :class:`DeadlineIndex` keeps at most ``capacity`` deadlines, the
earliest ones. Deadlines after its *horizon* are not kept; once the clock passes the horizon the
owner rescans its store (which holds every open interaction) and pushes them all again; a rescan
keeps every deadline already passed, however many, so that they are all handled at once.

Entries may be stale (a deadline that moved, an interaction since closed); the owner checks each
one it pops against the current state, as with a plain heap.

>>> index = DeadlineIndex(capacity=4)
>>> for due, name in [(5, "a"), (1, "b"), (9, "c"), (3, "d"), (7, "e")]:
...     index.push(due, name)
>>> len(index), index.horizon        # over capacity: the earliest half is kept
(2, 4)
>>> index.pop_due(4), index.needs_rescan(4), index.needs_rescan(5)
(['b', 'd'], False, True)
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right

_LAST = "\U0010ffff"  # sorts after every id


class DeadlineIndex:
    """The earliest deadlines, with a horizon up to which the index knows every deadline."""

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2, got {capacity}")
        self.capacity = capacity
        self._heap: list[tuple[int, str]] = []
        self.horizon: float = math.inf
        """Every deadline pushed since the last reset and not above this is in the index."""
        self._floor: float = -math.inf  # deadlines up to this are never dropped
        self._limit = capacity  # the size at which to shrink next

    def __len__(self) -> int:
        return len(self._heap)

    def reset(self, keep_through: float = -math.inf) -> None:
        """Forget everything: the owner pushes every open interaction's deadline again.

        Deadlines up to ``keep_through`` (the clock, for a rescan) are all kept, beyond
        capacity if need be."""
        self._heap = []
        self.horizon = math.inf
        self._floor = keep_through
        self._limit = self.capacity

    def push(self, due: int, interaction_id: str) -> None:
        if due > self.horizon:
            return  # found again by the rescan that passing the horizon calls for
        heapq.heappush(self._heap, (due, interaction_id))
        if len(self._heap) > self._limit:
            self._shrink()

    def retry_now(self, now: int, interaction_id: str) -> None:
        """Due at ``now`` and deferred to the next step: kept even beyond the horizon."""
        self.push(int(min(now, self.horizon)), interaction_id)

    def pop_due(self, now: int) -> list[str]:
        """The ids whose deadline is at or before ``now``, removed from the index.

        Complete unless :meth:`needs_rescan` (``reset(keep_through=now)`` and pushes first).
        """
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap)[1])
        return out

    def needs_rescan(self, now: int) -> bool:
        """Deadlines up to ``now`` may be missing: reset and push every one again first."""
        return now > self.horizon

    def _shrink(self) -> None:
        """Keep the earliest half; the horizon falls just below the first deadline dropped.

        Entries sharing the cut's deadline are dropped together (even all of them: the rescan
        finds them). None at or below the floor is dropped, so after a rescan the index may stay
        over capacity until those are popped; the next attempt waits until it doubled."""
        heap = self._heap
        heap.sort()  # a sorted list is a heap
        half: int = heap[self.capacity // 2][0]
        cut: int | None = half
        if half <= self._floor:
            above = bisect_right(heap, (self._floor, _LAST))
            cut = heap[above][0] if above < len(heap) else None
        if cut is not None:
            del heap[bisect_left(heap, (cut, "")) :]
            self.horizon = min(self.horizon, cut - 1)
        self._limit = max(self.capacity, 2 * len(heap))
