"""What the stream keeps per interaction, and the pure rules that change it.

An open interaction keeps every copy of its events that can still change its record (in-window,
late, duplicate copies; never expired ones), the revision and content hash of the record it last
emitted, and whether a copy arrived since. Its record is always recomputed from the copies with the
very same :func:`rewards.function.compute_record` as the replay, so the stream never holds a second
implementation of the reward. A closed interaction shrinks to a tombstone (its ``t_close``) that
is remembered for ``remember_closed_s`` so that a straggler can never open it again.

Copies are identified by ``(event_id, received_at)``: the same pair twice is one physical copy
delivered twice (a redelivery after a crash) and changes nothing, which makes replaying input
after a restart harmless.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from rewards.config import RewardConfig
from rewards.record import RewardRecord
from rewards.timestamps import US_PER_S, to_us

# The event fields the reward function reads; the rest (client, sent_at, ...) is not stored.
KEPT_FIELDS = (
    "event_id", "type", "ts", "received_at", "interaction_id", "session_id", "user_id",
    "org_id", "checkpoint_id", "experiment", "privacy_mode", "payload",
)  # fmt: skip


class Arrival(enum.StrEnum):
    """What one copy is for its interaction (reward spec v1, "The window")."""

    in_window = "in_window"  # received_at < t_close
    late = "late"  # t_close <= received_at < t_close + R: counted, changes no term
    expired = "expired"  # received_at >= t_close + R: in no record and no count
    closed = "closed"  # the interaction was already closed and forgotten but for its id
    redelivered = "redelivered"  # this very copy was stored already: nothing changes


def classify(received_us: int, t_open_us: int, config: RewardConfig) -> Arrival:
    """In-window, late or expired, by server time only.

    >>> cfg = RewardConfig(window_s=10, late_s=5)
    >>> [classify(t * US_PER_S, 0, cfg).value for t in (0, 9, 10, 14, 15)]
    ['in_window', 'in_window', 'late', 'late', 'expired']
    """
    t_close = t_open_us + config.window_s * US_PER_S
    if received_us < t_close:
        return Arrival.in_window
    if received_us < t_close + config.late_s * US_PER_S:
        return Arrival.late
    return Arrival.expired


@dataclass(slots=True)
class OpenInteraction:
    """An interaction whose copies are still kept."""

    partition: int
    t_open: int  # microseconds; the smallest received_at of its stored copies
    copies: list[dict[str, Any]] = field(default_factory=list)
    revision: int = -1  # of the last emitted record; -1 before the first
    emitted_hash: str | None = None  # content hash of that record
    dirty: bool = True  # a copy arrived since the last emission

    def t_close(self, config: RewardConfig) -> int:
        return self.t_open + config.window_s * US_PER_S

    def emit_due(self, config: RewardConfig) -> int:
        """Clock value from which the record may be emitted: t_close + grace."""
        return self.t_close(config) + config.grace_s * US_PER_S

    def purge_due(self, config: RewardConfig) -> int:
        """Clock value from which nothing can change the record: t_close + R + grace."""
        return self.emit_due(config) + config.late_s * US_PER_S

    def next_due(self, config: RewardConfig) -> int:
        """When this interaction next needs attention."""
        return self.emit_due(config) if self.dirty else self.purge_due(config)


@dataclass(slots=True, frozen=True)
class Tombstone:
    """A closed interaction: only its id (the table key) and when it closed."""

    partition: int
    t_close: int

    def forget_due(self, config: RewardConfig) -> int:
        return self.t_close + config.remember_closed_s * US_PER_S


Entry = OpenInteraction | Tombstone


def new_interaction(partition: int, event: dict[str, Any]) -> OpenInteraction:
    return OpenInteraction(partition=partition, t_open=to_us(event["received_at"]))


def split_by_org(entry: OpenInteraction) -> dict[str, OpenInteraction]:
    """A legacy entry (keyed by interaction id alone) as one entry per organisation of its copies.

    One organisation keeps the entry as it is. Several (two tenants merged by the legacy key)
    each get their own copies, marked dirty with no emitted hash, so that each emits a record at
    the next revision, which replaces the merged one. A copy without ``org_id`` goes with ``""``.

    >>> cp = [{"org_id": "a", "received_at": "2026-01-01T00:00:05Z"},
    ...       {"org_id": "b", "received_at": "2026-01-01T00:00:01Z"}]
    >>> parts = split_by_org(OpenInteraction(0, 0, cp, revision=2, emitted_hash="h", dirty=False))
    >>> sorted(parts), parts["b"].t_open, parts["a"].revision, parts["a"].dirty
    (['a', 'b'], 1767225601000000, 2, True)
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for copy in entry.copies:
        groups.setdefault(str(copy.get("org_id") or ""), []).append(copy)
    if len(groups) <= 1:
        return {next(iter(groups), ""): entry}
    return {
        org_id: OpenInteraction(
            entry.partition,
            t_open=min(to_us(c["received_at"]) for c in copies),
            copies=copies,
            revision=entry.revision,
        )
        for org_id, copies in groups.items()
    }


def add_copy(state: OpenInteraction, event: dict[str, Any], config: RewardConfig) -> Arrival:
    """Store one copy if it can change the record; say what it was.

    >>> cfg = RewardConfig(window_s=10, late_s=5)
    >>> ev = {"event_id": "e1", "received_at": "2026-01-01T00:00:00Z", "type": "x"}
    >>> st = new_interaction(0, ev)
    >>> [add_copy(st, e, cfg).value for e in (ev, ev, {**ev, "received_at": "2026-01-01T00:00:12Z"},
    ...                                        {**ev, "received_at": "2026-01-01T00:00:20Z"})]
    ['in_window', 'redelivered', 'late', 'expired']
    >>> len(st.copies), st.dirty
    (2, True)
    """
    received = to_us(event["received_at"])
    event_id = event["event_id"]
    for copy in state.copies:
        if copy["event_id"] == event_id and to_us(copy["received_at"]) == received:
            return Arrival.redelivered
    arrival = classify(received, min(state.t_open, received), config)
    if arrival is Arrival.expired:
        return arrival
    state.t_open = min(state.t_open, received)
    state.copies.append({k: event[k] for k in KEPT_FIELDS if k in event})
    state.dirty = True
    return arrival


def content_hash(record: RewardRecord) -> str:
    """Hash of every field but ``revision``: equal hashes, equal records.

    >>> from rewards.function import compute_record
    >>> ev = {"event_id": "e", "type": "interaction.started", "ts": "2026-01-01T00:00:00Z",
    ...       "received_at": "2026-01-01T00:00:00Z", "interaction_id": "i", "payload": {}}
    >>> r = compute_record([ev], RewardConfig())
    >>> content_hash(r) == content_hash(compute_record([ev], RewardConfig(), revision=3))
    True
    """
    body = record.to_json_dict()
    del body["revision"]
    canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(canonical, digest_size=16).hexdigest()


def encode(entry: Entry) -> bytes:
    """The table value of an entry (compact JSON)."""
    if isinstance(entry, Tombstone):
        return orjson.dumps({"p": entry.partition, "x": entry.t_close})
    return orjson.dumps(
        {
            "p": entry.partition,
            "o": entry.t_open,
            "r": entry.revision,
            "h": entry.emitted_hash,
            "d": entry.dirty,
            "c": entry.copies,
        }
    )


def decode(raw: bytes) -> Entry:
    """Inverse of :func:`encode`.

    >>> st = OpenInteraction(2, 5, [{"event_id": "e"}], revision=1, emitted_hash="ab", dirty=False)
    >>> decode(encode(st)) == st, decode(encode(Tombstone(1, 9)))
    (True, Tombstone(partition=1, t_close=9))
    """
    obj = orjson.loads(raw)
    if "x" in obj:
        return Tombstone(obj["p"], obj["x"])
    return OpenInteraction(obj["p"], obj["o"], obj["c"], obj["r"], obj["h"], obj["d"])
