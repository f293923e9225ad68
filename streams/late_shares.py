"""The share of each event type that arrives after its interaction's window closed, and a warning
when it is high enough that rewards are lying.

Why: with a reward window shorter than users take to revert or follow up, those outcomes land in
``telemetry.late``, after the record was scored: a reverted edit then reads as a plain
acceptance, and nothing in the records says so (57 of 68 reverts and retentions came late under
20 s windows). The stream worker counts every valid event by type and every late one
(``rtrl_stream_events_by_type``, ``rtrl_stream_late_events``), and says in its log, at most once
a ``quiet_s`` per type, which outcome types come late past ``warn_share``. Pure: counts in, the
lines to log out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

WARN_SHARE = 0.1  # of an event type's arrivals, late ones
MIN_EVENTS = 20  # of the type, before its share is judged
QUIET_S = 60.0  # between two warnings for one type


@dataclass
class LateShares:
    warn_share: float = WARN_SHARE
    min_events: int = MIN_EVENTS
    quiet_s: float = QUIET_S
    seen: Counter[str] = field(default_factory=Counter)
    late: Counter[str] = field(default_factory=Counter)
    _warned_at: dict[str, float] = field(default_factory=dict)

    def count(self, types: list[str], late_types: list[str]) -> None:
        """One step's valid events by type, and the late ones among them."""
        self.seen.update(types)
        self.late.update(late_types)

    def share(self, event_type: str) -> float:
        seen = self.seen[event_type]
        return self.late[event_type] / seen if seen else 0.0

    def warnings(self, now: float, window_s: float | None = None) -> list[str]:
        """A line for each type whose late share is past ``warn_share`` over at least
        ``min_events``, not warned of in the last ``quiet_s``.

        >>> shares = LateShares()
        >>> shares.count(["edit.reverted"] * 30 + ["edit.accepted"] * 30, ["edit.reverted"] * 12)
        >>> print(*shares.warnings(100.0, window_s=20))  # doctest: +NORMALIZE_WHITESPACE
        12 of 30 edit.reverted events (40 %) arrived after their interaction's 20 s window
        closed: the rewards scored before them miss them (a reverted edit reads as kept);
        lengthen the reward window (reward config window_s) past how long users take
        >>> shares.warnings(130.0, window_s=20)  # said once a minute
        []
        """
        lines = []
        for event_type, late in sorted(self.late.items()):
            seen = self.seen[event_type]
            if seen < self.min_events or late / seen <= self.warn_share:
                continue
            if now - self._warned_at.get(event_type, -self.quiet_s) < self.quiet_s:
                continue
            self._warned_at[event_type] = now
            window = f"{window_s:g} s " if window_s else ""
            lines.append(
                f"{late} of {seen} {event_type} events ({100 * late / seen:.0f} %) arrived after "
                f"their interaction's {window}window closed: the rewards scored before them "
                f"miss them (a reverted edit reads as kept); lengthen the reward window (reward "
                f"config window_s) past how long users take"
            )
        return lines
