"""The agent world's closing A/B read by the world's own truth: tasks solved per interaction.

The platform's A/B report reads what users did (edits kept, follow-ups, calls), which is all a
deployment sees. The agent world also knows, for every run, whether the hidden tests pass on the
repository the run left: the primary metric the issue states. It is compared the same way as the
platform's metrics, per user (the unit the split randomises, two runs each): a ratio of per-user
sums, its delta-method variance, and Fieller's interval on the relative change
(``warehouse.ab.relative_change``).

The A/B is group-sequential (``stats.group_sequential``): it is looked at after each planned
share of its users, and stops at the first look whose ``|z|`` for tasks solved reaches that
look's O'Brien-Fleming bound (``Look``). The interval reported at the stop is Fieller's at the
same bound (a repeated confidence interval: it holds at whichever look the test stops), so it
excludes no change exactly when the test stopped for a change.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import NormalDist

from stats.group_sequential import crossing
from warehouse.ab import Z95, Change, RatioSums, relative_change

log = logging.getLogger("rtrl.run")
OUTSIDE = "outside the experiment"
Run = tuple[str, str, bool]  # a run's arm, its user's id, and whether it solved its task


def solved_sums(runs: Iterable[tuple[str, str, bool]]) -> dict[str, RatioSums]:
    """Per arm, the sums over users of x = runs and y = tasks solved, from ``(arm, user_id,
    solved)`` per run; runs outside the experiment are left out.

    >>> s = solved_sums([("a", "u1", True), ("a", "u1", False), ("a", "u2", True)])["a"]
    >>> s.n, s.sx, s.sy, s.sxx, s.syy, s.sxy
    (2, 3.0, 2.0, 5.0, 2.0, 3.0)
    """
    per_user: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for arm, user_id, solved in runs:
        if arm != OUTSIDE:
            unit = per_user[arm][user_id]
            unit[0] += 1
            unit[1] += int(solved)
    sums = {}
    for arm, users in per_user.items():
        xs, ys = [float(x) for x, _ in users.values()], [float(y) for _, y in users.values()]
        sums[arm] = RatioSums(n=len(xs), sx=sum(xs), sy=sum(ys),
                              sxx=sum(x * x for x in xs), syy=sum(y * y for y in ys),
                              sxy=sum(x * y for x, y in zip(xs, ys, strict=True)))  # fmt: skip
    return sums


def solved_change(runs: Iterable[tuple[str, str, bool]], control: str, treatment: str,
                  z: float = Z95) -> Change:  # fmt: skip
    """Tasks solved per interaction, ``treatment`` against ``control``, with its interval at
    ``z`` (95 % by default; the stopping look's bound after a group-sequential test).

    >>> runs = [("c", f"u{i}", i % 4 == 0) for i in range(40)]
    >>> runs += [("t", f"v{i}", i % 2 == 0) for i in range(40)]
    >>> ch = solved_change(runs, "c", "t")
    >>> round(ch.control, 2), round(ch.treatment, 2), round(ch.relative, 2), ch.ci_low > 0
    (0.25, 0.5, 1.0, True)
    """
    sums = solved_sums(runs)
    empty = RatioSums(n=0, sx=0.0, sy=0.0, sxx=0.0, syy=0.0, sxy=0.0)
    t, c = sums.get(treatment, empty), sums.get(control, empty)
    return relative_change(t.estimate(), t.variance(), c.estimate(), c.variance(), z)


@dataclass(frozen=True)
class Look:
    """One look at the closing A/B: ``look`` of ``len(bounds)``, the users seen, tasks
    solved's z (treatment above control positive; None where the arms cannot be compared: an
    arm empty, no spread) and every look's bound on ``|z|``."""

    look: int
    users: int
    z: float | None
    bounds: tuple[float, ...]

    @property
    def looks(self) -> int:
        return len(self.bounds)

    @property
    def bound(self) -> float:
        return self.bounds[self.look - 1]

    @property
    def p_value(self) -> float | None:
        """The stage-wise ordered p-value (Jennison & Turnbull 2000, 8.4): the chance, when
        nothing changed, of stopping at an earlier look, or at this one with ``|z|`` at least
        this large. At most the design's alpha exactly when the test stopped for a change.

        >>> round(Look(2, 200, 1.977430721332523, (2.797, 1.977430721332523)).p_value, 3)
        0.05
        >>> round(Look(1, 100, 2.5, (2.797, 1.977)).p_value, 4)  # the first look: nominal
        0.0124
        """
        if self.z is None:
            return None
        if math.isinf(self.z):
            return 0.0
        return crossing((*self.bounds[: self.look - 1], max(abs(self.z), 1e-9))).any

    @property
    def crossed(self) -> bool:
        """The test stops here for a change (either way)."""
        return self.z is not None and abs(self.z) >= self.bound

    @property
    def last(self) -> bool:
        return self.look == self.looks


def solved_look(runs: Iterable[Run], control: str, treatment: str,
                look: int, bounds: tuple[float, ...]) -> Look:  # fmt: skip
    """The ``look``-th (1-based) look at tasks solved under ``bounds``: the z of the
    difference that the A/B report's p-value tests (``warehouse.ab.relative_change``).

    >>> runs = [("c", f"u{i}", i % 4 == 0) for i in range(40)]
    >>> runs += [("t", f"v{i}", i % 2 == 0) for i in range(40)]
    >>> at = solved_look(runs, "c", "t", 1, (2.797, 1.977))
    >>> round(at.z, 2), at.crossed, at.users
    (2.36, False, 80)
    """
    rows = list(runs)
    ch = solved_change(rows, control, treatment)
    users = len({(arm, user) for arm, user, _ in rows if arm in (control, treatment)})
    z = None
    if ch.p_value is not None and ch.treatment is not None and ch.control is not None:
        size = math.inf if ch.p_value <= 0 else -NormalDist().inv_cdf(ch.p_value / 2)
        z = math.copysign(size, ch.treatment - ch.control)
    return Look(look, users, z, bounds)


def play_in_looks(users: int, bounds: tuple[float, ...], arms: tuple[str, str],
                  play: Callable[[int, int], Iterable[Run]]) -> Look:  # fmt: skip
    """A group-sequential test of ``users`` users under ``bounds`` (one a look; ``arms``: the
    control's and the treatment's names): ``play(start, stop)`` plays users ``start`` to
    ``stop`` (in their order) and returns their runs; after each equal share, tasks solved is
    looked at, and the test stops at the first look that crosses its bound. The last look.

    >>> def play(start, stop):  # users alternate arms; the treatment solves every task
    ...     return [("ct"[u % 2], f"u{u}", u % 2 == 1 or u % 3 == 0) for u in range(start, stop)]
    >>> at = play_in_looks(200, (2.797, 1.977), ("c", "t"), play)
    >>> at.look, at.users, at.crossed
    (1, 100, True)
    """
    rows: list[Run] = []
    looked: Look | None = None
    for k in range(1, len(bounds) + 1):
        rows += play(users * (k - 1) // len(bounds), users * k // len(bounds))
        looked = solved_look(rows, *arms, k, bounds)
        log.info("closing A/B, look %d of %d: %d users, tasks solved z %s against the bound "
                 "%.3f: %s", k, len(bounds), looked.users,
                 "n/a" if looked.z is None else f"{looked.z:+.2f}", looked.bound,
                 "stop" if looked.crossed or looked.last else "go on")  # fmt: skip
        if looked.crossed:
            break
    assert looked is not None, "no look: bounds is empty"
    return looked
