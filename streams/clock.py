"""The clock of one input partition (reward spec v1): server time, or the wall clock when idle.

It is the largest ``received_at`` seen on the partition; when the partition is *idle* (the worker
has caught up with its end and nothing new arrived for ``grace``) the wall clock moves it forward,
so that the last windows of a quiet partition still close. It never goes backwards.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PartitionClock:
    """Microseconds since the epoch; 0 before the first event.

    >>> clock = PartitionClock(grace_us=5_000_000)
    >>> clock.observe(100); clock.observe(40); clock.now
    100
    >>> clock.is_idle(wall_us=4_000_000, caught_up=True)  # nothing seen yet: since start
    False
    >>> clock.is_idle(wall_us=9_000_000, caught_up=True), clock.is_idle(9_000_000, caught_up=False)
    (True, False)
    >>> clock.advance_to_wall(9_000_000); clock.now
    9000000
    """

    grace_us: int
    now: int = 0
    last_arrival_wall_us: int = 0  # wall time of the last event (or of the clock's creation)

    def observe(self, received_us: int, wall_us: int | None = None) -> None:
        """An event with this ``received_at`` arrived (at wall time ``wall_us``)."""
        if received_us > self.now:
            self.now = received_us
        if wall_us is not None:
            self.last_arrival_wall_us = wall_us

    def is_idle(self, wall_us: int, caught_up: bool) -> bool:
        """Caught up with the partition's end and nothing new for ``grace``."""
        return caught_up and wall_us - self.last_arrival_wall_us >= self.grace_us

    def advance_to_wall(self, wall_us: int) -> None:
        if wall_us > self.now:
            self.now = wall_us
