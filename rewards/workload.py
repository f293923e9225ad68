"""A seeded generator of realistic telemetry for tests and benchmarks.

Each interaction follows a plausible turn: a request, tool calls (some invalid), perhaps sub-agents
or clarifying questions, proposed edits, the user's decisions, reverts, retention measurements,
a completion and sometimes a follow-up. The delivery is as messy as production: client clocks skew
and carry offsets, events arrive out of order, retries duplicate them, offline clients flush late
or expired events, some edit events refer to a proposal that never arrived (orphans), some users
are in privacy mode, and interactions spread over several checkpoints and an A/B experiment.
The same arguments always give the same events, in arrival order (by ``received_at``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rewards.eventio import write_jsonl, write_parquet
from rewards.timestamps import US_PER_S, format_us, to_us

__all__ = [
    "CheckpointProfile",
    "DEFAULT_PROFILES",
    "generate_workload",
    "make_event",
    "write_jsonl",
    "write_parquet",
]


@dataclass(frozen=True)
class CheckpointProfile:
    """How a checkpoint's agent behaves: the probabilities that shape its events."""

    checkpoint_id: str
    p_invalid_tool: float = 0.06  # per tool call
    p_clarify: float = 0.10  # per interaction: asks before (or instead of) editing
    p_subagents: float = 0.20  # per interaction: fans out to sub-agents
    p_subagent_unused: float = 0.30  # per sub-agent: its result is not used
    p_accept: float = 0.60  # per edit; p_reject is a fixed 0.25, the rest stays undecided


DEFAULT_PROFILES = (
    CheckpointProfile("ckpt-0001"),
    CheckpointProfile("ckpt-0002", p_invalid_tool=0.05, p_accept=0.63),
    CheckpointProfile("ckpt-0003", p_invalid_tool=0.12, p_subagents=0.35, p_subagent_unused=0.5),
)
EXPERIMENT = "exp-context-window"
_CLIENT = {"name": "rtrl-vscode", "version": "1.4.2"}
_OFFSETS_MIN = (0, 0, 0, 60, 120, -300, -420, 330, 540)  # client time zones, in minutes


def _between(rng: random.Random, low: int, high: int) -> int:
    """An int in [low, high): ``randrange`` without its checks, which cost in the hot loop."""
    return low + int(rng.random() * (high - low))


class _Ids:
    """UUIDv7-shaped ids from the seeded generator (the wall clock never enters)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def __call__(self, at_us: int) -> str:
        h = f"{(at_us // 1000) & 0xFFFFFFFFFFFF:012x}{self._rng.getrandbits(80):020x}"
        return f"{h[:8]}-{h[8:12]}-7{h[13:16]}-{h[16:20]}-{h[20:32]}"


@dataclass(frozen=True)
class _User:
    user_id: str
    org_id: str
    skew_us: int  # client clock error
    offset_min: int  # client time zone
    privacy: bool
    arm: str | None


@lru_cache(maxsize=1 << 17)
def _second_prefix(second: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of an epoch second (cached: formatting dominates otherwise)."""
    return format_us(second * US_PER_S)[:19]


@lru_cache(maxsize=64)
def _offset_suffix(offset_min: int) -> str:
    if offset_min == 0:
        return "Z"
    sign = "+" if offset_min > 0 else "-"
    hours, minutes = divmod(abs(offset_min), 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


def _client_ts(true_us: int, user: _User, as_sent: bool) -> str:
    """The client's ``ts``: a skewed clock with millisecond precision, in the client's own form
    (local offset) when ``as_sent``, else as the collector normalises it (UTC, microseconds)."""
    if not as_sent:
        second, micro = divmod(true_us + user.skew_us, US_PER_S)
        return f"{_second_prefix(second)}.{micro // 1000:03d}000Z"
    second, micro = divmod(true_us + user.skew_us + user.offset_min * 60 * US_PER_S, US_PER_S)
    return f"{_second_prefix(second)}.{micro // 1000:03d}{_offset_suffix(user.offset_min)}"


class _Generator:
    def __init__(self, seed: int, start_us: int, span_s: int, profiles, n_users: int,
                 p_privacy_user: float, p_duplicate: float, p_orphan: float,
                 ts_as_sent: bool) -> None:  # fmt: skip
        self.rng = random.Random(seed)
        self.new_id = _Ids(self.rng)
        self.start_us, self.span_us = start_us, span_s * US_PER_S
        self.profiles = profiles
        self.p_duplicate, self.p_orphan = p_duplicate, p_orphan
        self.ts_as_sent = ts_as_sent
        rng = self.rng
        self.users = [
            _User(
                user_id=f"u_{rng.getrandbits(64):016x}",
                org_id=f"org-{rng.randrange(8):02d}",
                skew_us=int(rng.gauss(0, 2.0) * US_PER_S) if rng.random() < 0.9
                else _between(rng, -600, 600) * US_PER_S,
                offset_min=rng.choice(_OFFSETS_MIN),
                privacy=rng.random() < p_privacy_user,
                arm=rng.choice(("control", "treatment")) if rng.random() < 0.5 else None,
            )
            for _ in range(n_users)
        ]  # fmt: skip
        self.sessions = {u.user_id: f"s_{rng.getrandbits(48):012x}" for u in self.users}
        self.out: list[tuple[int, str, dict[str, Any]]] = []

    def interaction(self) -> None:
        rng = self.rng
        user = rng.choice(self.users)
        profile = rng.choice(self.profiles)
        t0 = self.start_us + rng.randrange(self.span_us)
        envelope: dict[str, Any] = {
            "schema_version": 1,
            "interaction_id": f"i_{self.new_id(t0)}",
            "session_id": self.sessions[user.user_id],
            "user_id": user.user_id,
            "org_id": user.org_id,
            "checkpoint_id": profile.checkpoint_id,
        }
        if user.arm is not None:
            envelope["experiment"] = {"name": EXPERIMENT, "arm": user.arm}
        if user.privacy:
            envelope["privacy_mode"] = True
        envelope["client"] = _CLIENT
        emit = _Emitter(self, user, envelope, offline=rng.random() < 0.02)

        emit(t0, "interaction.started", {"mode": "agent"} if rng.random() < 0.8 else {})
        t = t0
        abandoned = rng.random() < 0.04
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 3, 4, 5))):
            t += _between(rng, 300_000, 4 * US_PER_S)
            tool = rng.choice(("read_file", "grep", "run_tests", "edit_file", "list_dir"))
            if not abandoned:
                emit(
                    t,
                    "agent.tool_call",
                    {"tool": tool, "valid": rng.random() >= profile.p_invalid_tool},
                )
        if rng.random() < profile.p_subagents:
            for _ in range(_between(rng, 2, 5)):
                t += _between(rng, US_PER_S, 20 * US_PER_S)
                emit(t, "agent.subagent_finished", {
                    "subagent_id": f"sa_{rng.getrandbits(32):08x}",
                    "contributed": rng.random() >= profile.p_subagent_unused})  # fmt: skip
        clarified = rng.random() < profile.p_clarify
        if clarified and not abandoned:
            for _ in range(rng.choice((1, 1, 2))):
                t += _between(rng, US_PER_S, 5 * US_PER_S)
                emit(t, "agent.clarifying_question", {})
        n_edits = 0 if clarified and rng.random() < 0.7 else rng.choice((0, 1, 1, 1, 2, 2, 3))
        edits = []
        for _ in range(n_edits):
            t += _between(rng, US_PER_S, 10 * US_PER_S)
            edit_id = f"ed_{rng.getrandbits(40):010x}"
            edits.append(edit_id)
            payload = {"edit_id": edit_id, "lines_added": _between(rng, 0, 80),
                       "lines_removed": _between(rng, 0, 30)}  # fmt: skip
            emit(t, "agent.edit_proposed", payload)
            if rng.random() < 0.03:  # the agent re-sent the same edit: still one edit
                emit(t + 200_000, "agent.edit_proposed", payload)
        if abandoned:
            return
        t += _between(rng, 200_000, 3 * US_PER_S)
        emit(t, "interaction.completed", {"latency_ms": (t - t0) // 1000,
                                          "output_tokens": _between(rng, 20, 4000)})  # fmt: skip
        self._user_reactions(emit, profile, t, edits)

    def _user_reactions(self, emit: _Emitter, profile: CheckpointProfile, t_done: int,
                        edits: list[str]) -> None:  # fmt: skip
        rng = self.rng
        rejected_any = False
        for edit_id in edits:
            t = t_done + _between(rng, 2 * US_PER_S, 120 * US_PER_S)
            roll = rng.random()
            if roll < profile.p_accept:
                if rng.random() < 0.05:  # rejected first, then changed their mind
                    emit(t, "edit.rejected", {"edit_id": edit_id})
                    t += _between(rng, US_PER_S, 30 * US_PER_S)
                emit(t, "edit.accepted", {"edit_id": edit_id})
                if rng.random() < 0.08:
                    emit(
                        t + _between(rng, 10, 600) * US_PER_S, "edit.reverted", {"edit_id": edit_id}
                    )
                # 300 s lands in the window, 1500 s near its end, 2400 s late, a day expired
                for after_s, chance in ((300, 1.0), (1500, 0.5), (2400, 0.3), (86_400, 0.03)):
                    if rng.random() >= chance:
                        continue
                    emit(t + after_s * US_PER_S, "edit.retention", {
                        "edit_id": edit_id, "after_s": after_s,
                        "retained_fraction": round(rng.betavariate(4, 1.5), 3)})  # fmt: skip
            elif roll < profile.p_accept + 0.25:
                rejected_any = True
                emit(t, "edit.rejected", {"edit_id": edit_id})
        if rng.random() < self.p_orphan:  # a decision whose proposal never reached us
            emit(t_done + 5 * US_PER_S, rng.choice(("edit.accepted", "edit.rejected")),
                 {"edit_id": f"ed_{rng.getrandbits(40):010x}"})  # fmt: skip
        if rng.random() < (0.6 if rejected_any else 0.3):
            dissatisfied = rng.random() < (0.5 if rejected_any else 0.15)
            emit(t_done + _between(rng, 20, 900) * US_PER_S, "followup.sent",
                 {"dissatisfied": dissatisfied})  # fmt: skip


class _Emitter:
    """Stamps one interaction's events and delivers them: delay, retries, offline flushes."""

    def __init__(self, gen: _Generator, user: _User, envelope: dict[str, Any], offline: bool):
        self.gen, self.user, self.envelope, self.offline = gen, user, envelope, offline

    def __call__(self, true_us: int, type_: str, payload: dict[str, Any]) -> None:
        gen, rng = self.gen, self.gen.rng
        event_id = gen.new_id(true_us)
        event = dict(self.envelope)
        as_sent = gen.ts_as_sent
        event.update(event_id=event_id, type=type_, ts=_client_ts(true_us, self.user, as_sent),
                     sent_at=_client_ts(true_us + _between(rng, 1_000, 50_000), self.user, as_sent),
                     payload=payload)  # fmt: skip
        received = true_us + int(rng.expovariate(1 / 150_000)) + 1_000
        if self.offline and rng.random() < 0.5:  # buffered while offline: late or expired
            received += _between(rng, 1800, 5 * 3600) * US_PER_S
        gen.out.append((received, event_id, event))
        if rng.random() < gen.p_duplicate:  # a retry after a lost acknowledgement
            retry = received + _between(rng, 500_000, 30 * US_PER_S)
            gen.out.append((retry, event_id, dict(event)))


def generate_workload(
    n_interactions: int,
    seed: int = 0,
    *,
    start: str = "2026-11-30T00:00:00Z",
    span_s: int = 6 * 3600,
    profiles: tuple[CheckpointProfile, ...] = DEFAULT_PROFILES,
    n_users: int | None = None,
    p_privacy_user: float = 0.05,
    p_duplicate: float = 0.03,
    p_orphan: float = 0.02,
    ts_as_sent: bool = False,
) -> list[dict[str, Any]]:
    """Events of ``n_interactions`` interactions (about 10 each), in arrival order.

    Every event is valid per events-v1 and looks as the collector publishes it: ``received_at``
    set, timestamps normalised to UTC with microseconds. ``ts_as_sent=True`` keeps ``ts`` and
    ``sent_at`` as clients send them instead (local offsets, milliseconds).

    >>> events = generate_workload(20, seed=7)
    >>> events == generate_workload(20, seed=7), len({e["interaction_id"] for e in events})
    (True, 20)
    >>> all(a["received_at"] <= b["received_at"] for a, b in zip(events, events[1:]))
    True
    """
    if not profiles:
        raise ValueError("at least one checkpoint profile is needed")
    gen = _Generator(seed, to_us(start), span_s, profiles, n_users or max(1, n_interactions // 8),
                     p_privacy_user, p_duplicate, p_orphan, ts_as_sent)  # fmt: skip
    for _ in range(n_interactions):
        gen.interaction()
    gen.out.sort(key=lambda item: (item[0], item[1]))
    events = []
    for received, _, event in gen.out:
        second, micro = divmod(received, US_PER_S)
        event["received_at"] = f"{_second_prefix(second)}.{micro:06d}Z"
        events.append(event)
    return events


def make_event(
    event_id: str,
    type_: str,
    received_at: str,
    payload: dict[str, Any] | None = None,
    *,
    ts: str | None = None,
    interaction_id: str = "i-1",
    **envelope: Any,
) -> dict[str, Any]:
    """One hand-written event for tests: ``ts`` defaults to ``received_at``, ids to fixed ones.

    >>> make_event("e1", "agent.clarifying_question", "2026-11-30T10:00:00Z")["checkpoint_id"]
    'ckpt-0001'
    """
    event: dict[str, Any] = {
        "event_id": event_id,
        "type": type_,
        "schema_version": 1,
        "ts": ts or received_at,
        "received_at": received_at,
        "interaction_id": interaction_id,
        "session_id": "s-1",
        "user_id": "u-1",
        "org_id": "org-1",
        "checkpoint_id": "ckpt-0001",
        "payload": payload if payload is not None else {},
    }
    event.update(envelope)
    return event
