"""A canary's evidence: everything its decision rests on, in one file another tool can write,
so that its whole course can be re-run (``rtrl canary evaluate``) like a gate decision.

JSON lines. The first line is the header::

    {"kind": "rtrl.canary-evidence", "version": 1, "experiment": "canary-ckpt-7",
     "candidate": "ckpt-7", "started_at": "2026-12-01T00:00:00Z",
     "look_times": ["2026-12-01T06:00:00Z", ...],
     "shares": [{"from": "2026-12-01T00:00:00Z", "percent": 10.0}],
     "config": {...}}

``config`` holds the canary's settings as ``release.canary_config.CanaryConfig`` names them
(margin, alpha, min_users, min_exposure_hours, deadline_hours, user_window_hours, strata and their
weights, reward_min, ...; a field left out takes its default). Every other line is one revision
of one interaction's reward::

    {"interaction_id": "i-1", "revision": 0, "user_id": "u-1", "arm": "canary",
     "at": "2026-12-01T01:02:03Z", "landed_at": "2026-12-01T01:40:00Z", "reward": 1.8,
     "stratum": "heavy", "invalid_tool_calls": 0, "clarifying": 0, "edits": 1}

``arm`` is ``parent`` or ``canary``; ``at`` is when the interaction was served, ``landed_at``
when this revision of its reward landed; ``reward`` is a number or null (censored: no outcome);
``stratum`` names the user's stratum of activity before the canary (one of the config's strata,
or ``all``); ``invalid_tool_calls``, ``clarifying`` and ``edits`` are optional counts (absent:
0) for the guardrails. Times are RFC 3339.

What a look at time ``t`` sees (:func:`users_at`): the latest revision of each interaction that
landed by ``t``; each user's outcome over a fixed window after their first exposure (their
first ``at``), ``user_window_hours`` long, counted once the window has closed and every
interaction served in it has a reward landed (a window of 0: every interaction landed so far);
users counted for the sample-ratio check at their first assignment. Pure but for the file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from checkpoints.canary_names import CANARY_ARM, PARENT_ARM
from release.canary import UserSums
from release.canary_estimand import ALL

FILE = "canary_evidence.jsonl"
KIND = "rtrl.canary-evidence"
_FLAGS = {"invalid_tool_calls": "invalid_tool_call_rate", "clarifying": "clarifying_rate",
          "edits": "edit_rate"}  # fmt: skip
_COUNTS = (*_FLAGS, "tool_calls")  # tool_calls: every call, valid or not (no flag of its own yet)


class Share(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    since: datetime = Field(alias="from")
    percent: float = Field(gt=0, lt=100)


class Header(BaseModel):
    """The evidence file's first line."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["rtrl.canary-evidence"] = "rtrl.canary-evidence"
    version: Literal[1] = 1
    experiment: str = Field(min_length=1)
    candidate: str | None = None
    started_at: datetime
    look_times: list[datetime] = Field(default_factory=list)
    shares: list[Share] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    interaction_id: str
    revision: int
    user_id: str
    arm: str
    at: datetime
    landed_at: datetime
    reward: float | None
    stratum: str = ALL
    invalid_tool_calls: int = 0
    clarifying: int = 0
    edits: int = 0
    tool_calls: int = 0
    org_id: str | None = None  # ids are unique within it; absent in files written before

    @property
    def interaction(self) -> tuple[str | None, str]:
        return self.org_id, self.interaction_id

    @property
    def user(self) -> tuple[str | None, str]:
        """The unit of randomisation: the organisation's user."""
        return self.org_id, self.user_id

    def to_json(self) -> dict[str, Any]:
        body = {
            "interaction_id": self.interaction_id,
            "revision": self.revision,
            "user_id": self.user_id,
            "arm": self.arm,
            "at": _rfc3339(self.at),
            "landed_at": _rfc3339(self.landed_at),
            "reward": self.reward,
            "stratum": self.stratum,
            "invalid_tool_calls": self.invalid_tool_calls,
            "clarifying": self.clarifying,
            "edits": self.edits,
            "tool_calls": self.tool_calls,
        }
        if self.org_id is not None:
            body["org_id"] = self.org_id
        return body


def _rfc3339(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _time(value: Any, where: str, name: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{where}: {name} must be an RFC 3339 time, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{where}: {name} must be an RFC 3339 time, got {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{where}: {name} needs a time zone, got {value!r}")
    return parsed


def _row(data: Any, where: str) -> Row:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a JSON object per line, got {type(data).__name__}")
    missing = [k for k in ("interaction_id", "revision", "user_id", "arm", "at", "landed_at",
                           "reward") if k not in data]  # fmt: skip
    if missing:
        raise ValueError(f"{where}: missing {missing}")
    for name in ("interaction_id", "user_id"):
        if not isinstance(data[name], str) or not data[name]:
            raise ValueError(f"{where}: {name} must be a non-empty string")
    if data["arm"] not in (PARENT_ARM, CANARY_ARM):
        raise ValueError(f"{where}: arm must be {PARENT_ARM!r} or {CANARY_ARM!r}")
    revision = data["revision"]
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise ValueError(f"{where}: revision must be an integer >= 0, got {revision!r}")
    reward = data["reward"]
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)
                               or not math.isfinite(reward)):  # fmt: skip
        raise ValueError(f"{where}: reward must be a finite number or null, got {reward!r}")
    counts = {}
    for name in _COUNTS:
        value = data.get(name) or 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{where}: {name} must be a count >= 0, got {value!r}")
        counts[name] = value
    stratum = data.get("stratum") or ALL
    if not isinstance(stratum, str):
        raise ValueError(f"{where}: stratum must be a string, got {stratum!r}")
    org_id = data.get("org_id")
    if org_id is not None and (not isinstance(org_id, str) or not org_id):
        raise ValueError(f"{where}: org_id must be a non-empty string or absent")
    return Row(data["interaction_id"], revision, data["user_id"], data["arm"],
               _time(data["at"], where, "at"), _time(data["landed_at"], where, "landed_at"),
               None if reward is None else float(reward), stratum, **counts,
               org_id=org_id)  # fmt: skip


def read_evidence(path: str | Path) -> tuple[Header, list[Row]]:
    """The header and rows of a canary evidence file; a malformed line is an error naming it."""
    path = Path(path)
    lines = [(n, line) for n, line in enumerate(path.read_bytes().splitlines(), 1) if line.strip()]
    if not lines:
        raise ValueError(f"{path}: empty, a header line is needed")
    parsed = []
    for number, line in lines:
        try:
            parsed.append((number, orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number}: not JSON ({exc})") from None
    (first, head), rest = parsed[0], parsed[1:]
    try:
        header = Header.model_validate(head)
    except ValueError as exc:
        raise ValueError(f"{path} line {first}: not a canary evidence header: {exc}") from None
    return header, [_row(data, f"{path} line {number}") for number, data in rest]


def evidence_bytes(header: Header, rows: Iterable[Row]) -> bytes:
    head = orjson.dumps(header.model_dump(mode="json", by_alias=True)) + b"\n"
    return head + b"".join(orjson.dumps(row.to_json()) + b"\n" for row in rows)


def write_evidence(path: str | Path, header: Header, rows: Iterable[Row]) -> Path:
    """The evidence at ``path``, written whole, then renamed into place."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(evidence_bytes(header, rows))
    tmp.replace(path)
    return path


@dataclass(frozen=True)
class Seen:
    """What a look at one time sees."""

    users: dict[str, list[UserSums]]  # arm -> users whose outcome window has closed
    assigned: dict[str, int]  # arm -> users assigned by then (the sample-ratio check's counts)
    first_at: dict[str, list[datetime]]  # arm -> each assigned user's first exposure
    crossed: int  # users seen in both arms


def users_at(rows: Sequence[Row], t: datetime, window_hours: float) -> Seen:
    """Each arm's users as a look at ``t`` sees them (the module's docstring).

    >>> from datetime import UTC
    >>> h = lambda x: datetime(2026, 12, 1, tzinfo=UTC) + timedelta(hours=x)
    >>> rows = [Row("i1", 0, "u1", "canary", h(0), h(1), 1.0),
    ...         Row("i2", 0, "u1", "canary", h(2), h(3), None),
    ...         Row("i3", 0, "u1", "canary", h(30), h(31), 5.0),   # after u1's 24 h window
    ...         Row("i4", 0, "u2", "parent", h(10), h(11), 0.5)]
    >>> seen = users_at(rows, h(26), 24)
    >>> [(u.interactions, u.scored, u.reward) for u in seen.users["canary"]], seen.users["parent"]
    ([(2, 1, 1.0)], [])
    >>> sorted(seen.assigned.items())
    [('canary', 1), ('parent', 1)]
    """
    latest: dict[tuple[str | None, str], Row] = {}
    for row in rows:
        if row.landed_at <= t:
            held = latest.get(row.interaction)
            if held is None or row.revision > held.revision:
                latest[row.interaction] = row
    served: dict[tuple[str, tuple[str | None, str]], list[Row]] = {}
    first: dict[tuple[str, tuple[str | None, str]], datetime] = {}
    arms_of: dict[tuple[str | None, str], set[str]] = {}
    for row in rows:
        if row.at <= t:
            key = (row.arm, row.user)
            served.setdefault(key, []).append(row)
            first[key] = min(first.get(key, row.at), row.at)
            arms_of.setdefault(row.user, set()).add(row.arm)
    window = timedelta(hours=window_hours)
    users: dict[str, list[UserSums]] = {PARENT_ARM: [], CANARY_ARM: []}
    assigned = {PARENT_ARM: 0, CANARY_ARM: 0}
    first_at: dict[str, list[datetime]] = {PARENT_ARM: [], CANARY_ARM: []}
    for (arm, user), own in served.items():
        assigned[arm] += 1
        first_at[arm].append(first[(arm, user)])
        if window_hours == 0:  # no window: every interaction landed so far
            inside = {r.interaction for r in own if r.interaction in latest}
        else:
            start = first[(arm, user)]
            if t < start + window:
                continue  # the user's window is still open
            inside = {r.interaction for r in own if r.at < start + window}
            if any(i not in latest for i in inside):
                continue  # a reward of the window has not landed yet
        if not inside:
            continue
        landed = [latest[i] for i in sorted(inside, key=lambda i: (i[0] or "", i[1]))]
        scored = [r for r in landed if r.reward is not None]
        flagged = {metric: sum(getattr(r, name) > 0 for r in landed)
                   for name, metric in _FLAGS.items()}  # fmt: skip
        users[arm].append(UserSums(len(landed), len(scored), math.fsum(r.reward or 0.0
                                                                       for r in scored),
                                   flagged, landed[0].stratum))  # fmt: skip
    crossed = sum(len(arms) > 1 for arms in arms_of.values())
    return Seen(users, assigned, first_at, crossed)
