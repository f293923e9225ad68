"""A canary's course re-run from its evidence (``release.canary_evidence``): at each look time,
what that look saw, judged by ``release.canary.judge``; the first verdict other than ``wait``
ends it. The live canary (``release.canary_io``) takes its looks through :func:`look_at` too,
so a replay of its evidence at its recorded look times reaches its decision. Pure, no torch.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from checkpoints.canary_names import CANARY_ARM, PARENT_ARM
from release.canary import CanaryVerdict, arm_of, judge
from release.canary_config import CanaryConfig
from release.canary_evidence import Header, Row, Share, users_at
from rewards.monitors import MonitorThresholds


def look_at(rows: Sequence[Row], t: datetime, started_at: datetime, config: CanaryConfig,
            thresholds: MonitorThresholds, look: int,
            shares: Sequence[Share] = ()) -> CanaryVerdict:  # fmt: skip
    """The verdict of a look at ``t`` (the ``look``-th) on the evidence rows; ``shares``: the
    periods of a constant canary share (default: one, ``config.percent``), each tested for a
    sample-ratio mismatch on its own users."""
    seen = users_at(rows, t, config.user_window_hours)
    exposed = (t - started_at).total_seconds() / 3600
    return judge(arm_of(seen.users[PARENT_ARM]), arm_of(seen.users[CANARY_ARM]), config,
                 thresholds, look, expired=exposed >= config.deadline_hours,
                 crossed=seen.crossed, exposed_hours=exposed,
                 assigned=periods(seen.first_at, shares, config.percent))  # fmt: skip


def periods(first_at: Mapping[str, Sequence[datetime]], shares: Sequence[Share],
            percent: float) -> list[tuple[int, int, float]]:  # fmt: skip
    """Per period of a constant share: the users first assigned to parent and canary in it, and
    its percent (one period at ``percent`` when ``shares`` is empty)."""
    if not shares:
        return [(len(first_at[PARENT_ARM]), len(first_at[CANARY_ARM]), percent)]
    ordered = sorted(shares, key=lambda s: s.since)
    starts = [s.since for s in ordered]
    counts = [[0, 0] for _ in ordered]
    for column, arm in enumerate((PARENT_ARM, CANARY_ARM)):
        for at in first_at[arm]:  # a user before the first period counts in it
            counts[max(bisect.bisect_right(starts, at) - 1, 0)][column] += 1
    return [(p, c, share.percent) for (p, c), share in zip(counts, ordered, strict=True)]


@dataclass(frozen=True)
class Course:
    decision: str  # rollout, rollback or undecided
    reason: str | None
    looks: int
    decided_at: datetime | None
    verdicts: tuple[CanaryVerdict, ...]

    def to_json(self) -> dict[str, Any]:
        last = self.verdicts[-1].comparisons[0] if self.verdicts else None
        return {
            "decision": self.decision,
            "reason": self.reason,
            "looks": self.looks,
            "decided_at": None if self.decided_at is None else
            self.decided_at.isoformat().replace("+00:00", "Z"),
            "bound": None if last is None else {"metric": last.metric, "low": last.low,
                                                "high": last.high, "difference": last.difference},
        }  # fmt: skip


def config_of(header: Header, overrides: Mapping[str, Any] | None = None) -> CanaryConfig:
    """The recorded settings, with what-if ``overrides`` (None values ignored)."""
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    return CanaryConfig.model_validate({**header.config, **given})


def replay(header: Header, rows: Sequence[Row], config: CanaryConfig,
           thresholds: MonitorThresholds | None = None) -> Course:  # fmt: skip
    """The canary's course: a look at each of the header's look times (or, when it lists none,
    at each distinct time a reward landed), until a verdict other than ``wait``; past the
    deadline, one last look there."""
    thresholds = thresholds or MonitorThresholds()
    times = sorted(header.look_times) or sorted({r.landed_at for r in rows})
    verdicts: list[CanaryVerdict] = []
    for n, t in enumerate(times, start=1):
        verdict = look_at(rows, t, header.started_at, config, thresholds, n, header.shares)
        verdicts.append(verdict)
        if verdict.verdict != "wait":
            outcome = "rollout" if verdict.verdict == "rollout" else "rollback"
            return Course(outcome, "; ".join(verdict.reasons) or None, n, t, tuple(verdicts))
    reason = verdicts[-1].reasons[0] if verdicts and verdicts[-1].reasons else None
    return Course("undecided", reason, len(verdicts), None, tuple(verdicts))
