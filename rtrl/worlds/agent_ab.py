"""The agent world's closing A/B read by the world's own truth: tasks solved per interaction.

The platform's A/B report reads what users did (edits kept, follow-ups, calls), which is all a
deployment sees. The agent world also knows, for every run, whether the hidden tests pass on the
repository the run left: the primary metric the issue states. It is compared the same way as the
platform's metrics, per user (the unit the split randomises, two runs each): a ratio of per-user
sums, its delta-method variance, and Fieller's interval on the relative change
(``warehouse.ab.relative_change``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from warehouse.ab import Change, RatioSums, relative_change

OUTSIDE = "outside the experiment"


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


def solved_change(runs: Iterable[tuple[str, str, bool]], control: str, treatment: str) -> Change:
    """Tasks solved per interaction, ``treatment`` against ``control``, with its 95 % CI.

    >>> runs = [("c", f"u{i}", i % 4 == 0) for i in range(40)]
    >>> runs += [("t", f"v{i}", i % 2 == 0) for i in range(40)]
    >>> ch = solved_change(runs, "c", "t")
    >>> round(ch.control, 2), round(ch.treatment, 2), round(ch.relative, 2), ch.ci_low > 0
    (0.25, 0.5, 1.0, True)
    """
    sums = solved_sums(runs)
    empty = RatioSums(n=0, sx=0.0, sy=0.0, sxx=0.0, syy=0.0, sxy=0.0)
    t, c = sums.get(treatment, empty), sums.get(control, empty)
    return relative_change(t.estimate(), t.variance(), c.estimate(), c.variance())
