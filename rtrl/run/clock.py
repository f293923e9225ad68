"""How long one cycle of the loop takes, stage by stage: from the first user served by a
checkpoint to the next checkpoint serving (serve, the windows settling, sink, catalog, batches,
train and gate, switch). Wall time, as a person waiting for the loop sees it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

STAGES = ("serve", "settle", "sink", "catalog", "batches", "train", "switch")


@dataclass
class CycleClock:
    cycles: list[dict[str, float]] = field(default_factory=list)

    def start_cycle(self) -> None:
        self.cycles.append({})

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.cycles:
                spent = time.perf_counter() - started
                self.cycles[-1][name] = self.cycles[-1].get(name, 0.0) + spent

    def complete(self) -> list[dict[str, float]]:
        """The cycles that reached a new checkpoint serving (or its rejection): those that
        trained."""
        return [c for c in self.cycles if "train" in c]

    def share(self, stage: str) -> float | None:
        """The share of the complete cycles' time spent in ``stage`` (None before any):
        ``settle``'s is the loop waiting on reward windows to close.

        >>> CycleClock([{"serve": 1.0, "settle": 3.0, "train": 4.0}]).share("settle")
        0.375
        """
        cycles = self.complete()
        total = sum(sum(c.values()) for c in cycles)
        return sum(c.get(stage, 0.0) for c in cycles) / total if total > 0 else None

    def table(self) -> str:
        """
        >>> clock = CycleClock([{"serve": 2.0, "settle": 8.0, "train": 30.0, "switch": 0.5}])
        >>> for line in clock.table().splitlines()[1:]:
        ...     print(line)
            1    2.0    8.0      -      -      -   30.0    0.5   40.5
        waiting on reward windows (settle): 20 % of the cycles' time
        """
        head = "cycle " + " ".join(f"{s:>6}" for s in STAGES) + "  total"
        lines = [head]
        for n, cycle in enumerate(self.complete(), start=1):
            cells = " ".join(f"{cycle[s]:>6.1f}" if s in cycle else f"{'-':>6}" for s in STAGES)
            lines.append(f"{n:>5} {cells} {sum(cycle.values()):>6.1f}")
        waiting = self.share("settle")
        if waiting is not None:
            lines.append(
                f"waiting on reward windows (settle): {100 * waiting:.0f} % of the cycles' time"
            )
        return "\n".join(lines)
