"""The join of one input partition: events in, reward records and late events out. Pure.

:class:`PartitionProcessor` owns the state of one partition through a small :class:`StateStore`
(a dict in tests, the changelogged Faust table in the worker) and the partition's clock. A *step*
takes the valid events of one chunk (or none, on an idle tick with the wall clock) and returns what
to publish. The order that makes a crash harmless is the caller's, and is this:

1. ``step`` writes the ids whose records it is about to publish under the partition's *pending*
   key, then the new states, to the store (in that order: a crash keeps a prefix of the writes);
2. the caller makes those writes durable, then publishes the records and waits for their acks;
3. the caller calls :meth:`PartitionProcessor.published` (clears *pending*), then acks the input.

A crash before 2 completes leaves *pending* set: :meth:`PartitionProcessor.recover` republishes
exactly those records (same revision, same content, recomputed from the stored copies). A record
is thus never on ``rewards`` unless its revision is in the durable state, so a revision number
never names two different records, and revisions are 0..n without gaps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from infra.tenancy import scoped_key
from rewards.config import RewardConfig
from rewards.function import compute_record
from rewards.record import RewardRecord
from rewards.timestamps import US_PER_S, to_us
from streams.clock import PartitionClock
from streams.deadlines import DeadlineIndex
from streams.state import (
    Arrival,
    Entry,
    OpenInteraction,
    Tombstone,
    add_copy,
    classify,
    content_hash,
    decode,
    encode,
    new_interaction,
    split_by_org,
)

# At most this many records per step, so that the pending key and one step stay small even when
# the wall clock closes a whole quiet partition at once; the rest follow on the next step.
MAX_RECORDS_PER_STEP = 2000
# Deadlines kept in memory per partition (~180 bytes each); beyond, the store is rescanned.
DEADLINES_IN_MEMORY = 200_000
_PENDING_PREFIX = "\x00pending/"
# An interaction is (org_id, interaction_id) (reward spec, "The record"): its key holds both.
_INTERACTION_PREFIX = "t/"
# Written before keys held the organisation; migrated by :meth:`PartitionProcessor.recover`.
LEGACY_PREFIX = "i/"
_FORWARDED = frozenset({Arrival.late, Arrival.expired, Arrival.closed})


class StateStore(Protocol):
    """Bytes by string key; ``items`` may also yield other partitions' keys."""

    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, value: bytes) -> None: ...
    def delete(self, key: str) -> None: ...
    def items(self) -> Iterable[tuple[str, bytes]]: ...


def interaction_ref(org_id: str, interaction_id: str) -> str:
    """The processor's name for an interaction. The organisation's length comes first, so no
    pair of ids can spell another pair's name.

    >>> interaction_ref("acme", "i1"), interaction_ref("a/b", "c") != interaction_ref("a", "b/c")
    ('4:acme/i1', True)
    """
    return scoped_key(org_id, interaction_id)


def split_ref(ref: str) -> tuple[str, str]:
    """Inverse of :func:`interaction_ref`.

    >>> split_ref(interaction_ref("a/b", "c/d"))
    ('a/b', 'c/d')
    """
    length, rest = ref.split(":", 1)
    return rest[: int(length)], rest[int(length) + 1 :]


def interaction_key(org_id: str, interaction_id: str) -> str:
    return _INTERACTION_PREFIX + interaction_ref(org_id, interaction_id)


def _ref_key(ref: str) -> str:
    return _INTERACTION_PREFIX + ref


def pending_key(partition: int) -> str:
    return f"{_PENDING_PREFIX}{partition}"


@dataclass(frozen=True, slots=True)
class Incoming:
    """One valid event of the partition, with its raw bytes (forwarded as is when late)."""

    event: dict[str, Any]
    raw: bytes


@dataclass(slots=True)
class StepOutput:
    records: list[RewardRecord] = field(default_factory=list)  # to `rewards`
    late: list[tuple[Incoming, Arrival]] = field(default_factory=list)  # to `telemetry.late`


class PartitionProcessor:
    """State machine of one partition; see the module docstring for the order of effects."""

    def __init__(self, partition: int, config: RewardConfig, store: StateStore, wall_us: int = 0,
                 deadlines_in_memory: int = DEADLINES_IN_MEMORY) -> None:  # fmt: skip
        self.partition = partition
        self.config = config
        self.store = store
        self.clock = PartitionClock(config.grace_s * US_PER_S, last_arrival_wall_us=wall_us)
        self._due = DeadlineIndex(deadlines_in_memory)  # of the open interactions, by ref
        self._legacy_closed: dict[str, Tombstone] = {}  # legacy tombstones, by interaction id
        self.rescans = 0
        self._next_sweep = 0
        self.open_count = 0
        self.closed_count = 0

    # --- start-up -------------------------------------------------------------------------
    def recover(self) -> list[RewardRecord]:
        """Rebuild the in-memory deadlines from the store; the records a crash left unpublished.

        State written under the legacy key (the interaction id alone) is migrated here, after
        its pending records are recomputed (see :meth:`_migrate_legacy`). The caller publishes
        the records, then calls :meth:`published`.
        """
        self._due.reset()
        self.open_count = self.closed_count = 0
        records = self._pending_records()
        self._migrate_legacy()
        self.closed_count = len(self._legacy_closed)
        for ref, entry in self._entries():
            if isinstance(entry, OpenInteraction):
                self.open_count += 1
                self._due.push(entry.next_due(self.config), ref)
            else:
                self.closed_count += 1
        return records

    def _pending_records(self) -> list[RewardRecord]:
        """Pending ids are ``[org_id, interaction_id]`` pairs; a bare id is a legacy one."""
        raw_pending = self.store.get(pending_key(self.partition))
        records = []
        for item in orjson.loads(raw_pending) if raw_pending else ():
            key = (
                _ref_key(interaction_ref(*item)) if isinstance(item, list) else LEGACY_PREFIX + item
            )
            raw = self.store.get(key)
            pending = None if raw is None else decode(raw)
            if isinstance(pending, OpenInteraction) and pending.revision >= 0:
                records.append(compute_record(pending.copies, self.config, pending.revision))
        return records

    def _migrate_legacy(self) -> None:
        """Legacy entries of this partition move to the organisation's key.

        An open one is split by the ``org_id`` of its copies (:func:`streams.state.split_by_org`);
        the new keys are written before the legacy one is deleted, so a crash in between leaves
        the legacy entry to migrate again, to the same content. A legacy tombstone names no
        organisation: it stays under its legacy key, closes that id for every organisation until
        it is forgotten, and is then deleted like any tombstone.
        """
        self._legacy_closed = {}
        for key, raw in list(self.store.items()):
            if not key.startswith(LEGACY_PREFIX):
                continue
            entry = decode(raw)
            if entry.partition != self.partition:
                continue
            interaction_id = key[len(LEGACY_PREFIX) :]
            if isinstance(entry, Tombstone):
                self._legacy_closed[interaction_id] = entry
                continue
            for org_id, part in split_by_org(entry).items():
                self.store.put(interaction_key(org_id, interaction_id), encode(part))
            self.store.delete(key)

    def published(self) -> None:
        """The records of the last step are acknowledged: nothing is pending any more."""
        key = pending_key(self.partition)
        if self.store.get(key) is not None:
            self.store.delete(key)

    # --- one step -------------------------------------------------------------------------
    def step(self, incoming: Sequence[Incoming], wall_us: int,
             idle_wall_us: int | None = None) -> StepOutput:  # fmt: skip
        """Apply a chunk of events (arrival order), then emit and close what the clock allows.

        ``idle_wall_us``: the wall clock, given only when the partition is idle.
        """
        out = StepOutput()
        touched: dict[str, Entry | None] = {}
        for item in incoming:
            arrival = self._apply(item, touched, wall_us)
            if arrival in _FORWARDED:
                out.late.append((item, arrival))
        if idle_wall_us is not None:
            self.clock.advance_to_wall(idle_wall_us)
        emitted = self._emit_and_close(touched, out)
        if emitted:
            # Written first: the changelog keeps a partition's writes in order, so any durable
            # prefix that holds a new revision in a state also holds its pending id.
            pairs = [list(split_ref(ref)) for ref in emitted]
            self.store.put(pending_key(self.partition), orjson.dumps(pairs))
        for ref, entry in touched.items():
            if entry is None:
                self.store.delete(_ref_key(ref))
            else:
                self.store.put(_ref_key(ref), encode(entry))
        return out

    def _entries(self) -> Iterable[tuple[str, Entry]]:
        """This partition's interactions as stored (a scan of the store), by ref."""
        for key, raw in self.store.items():
            if key.startswith(_INTERACTION_PREFIX):
                entry = decode(raw)
                if entry.partition == self.partition:
                    yield key[len(_INTERACTION_PREFIX) :], entry

    def _rescan(self, touched: dict[str, Entry | None], now: int) -> None:
        """The clock passed the deadline index's horizon: push every open deadline again, the
        states of this step (``touched``, not stored yet) taking precedence over the store's."""
        self._due.reset(keep_through=now)
        for ref, entry in self._entries():
            if isinstance(entry, OpenInteraction) and ref not in touched:
                self._due.push(entry.next_due(self.config), ref)
        for ref, current in touched.items():
            if isinstance(current, OpenInteraction):
                self._due.push(current.next_due(self.config), ref)
        self.rescans += 1

    def _load(self, ref: str) -> Entry | None:
        raw = self.store.get(_ref_key(ref))
        if raw is not None:
            return decode(raw)
        return self._legacy_closed.get(split_ref(ref)[1]) if self._legacy_closed else None

    def _apply(self, item: Incoming, touched: dict[str, Entry | None], wall_us: int) -> Arrival:
        event = item.event
        self.clock.observe(to_us(event["received_at"]), wall_us)
        ref = interaction_ref(event["org_id"], event["interaction_id"])
        entry = touched[ref] if ref in touched else self._load(ref)
        if isinstance(entry, Tombstone):
            return Arrival.closed
        if entry is None:
            entry = new_interaction(self.partition, event)
            self.open_count += 1
            self._due.push(entry.emit_due(self.config), ref)
        t_open = entry.t_open
        arrival = add_copy(entry, event, self.config)
        if entry.t_open < t_open:  # an earlier copy: the window moved, and so do its deadlines
            self._due.push(entry.emit_due(self.config), ref)
        if arrival is not Arrival.redelivered or ref in touched:
            touched[ref] = entry
        if arrival is Arrival.redelivered:
            # Its first delivery may have died before reaching telemetry.late: forward it again.
            return classify(to_us(event["received_at"]), entry.t_open, self.config)
        return arrival

    def _emit_and_close(self, touched: dict[str, Entry | None], out: StepOutput) -> list[str]:
        """Emit and close what is due; the refs whose records were emitted, in order."""
        now = self.clock.now
        candidates = [i for i, e in touched.items() if isinstance(e, OpenInteraction)]
        if self._due.needs_rescan(now):
            self._rescan(touched, now)
        candidates += self._due.pop_due(now)
        seen: set[str] = set()
        emitted: list[str] = []
        for ref in candidates:
            if ref in seen:
                continue
            seen.add(ref)
            entry = touched[ref] if ref in touched else self._load(ref)
            if not isinstance(entry, OpenInteraction):
                continue
            if now < entry.emit_due(self.config):
                continue  # still open; its deadline entry is in the heap
            if entry.dirty:
                if len(out.records) >= MAX_RECORDS_PER_STEP:
                    self._due.retry_now(now, ref)  # next step
                    continue
                if self._emit(entry, out):
                    emitted.append(ref)
                touched[ref] = entry
            elif now >= entry.purge_due(self.config):
                touched[ref] = Tombstone(self.partition, entry.t_close(self.config))
                self.open_count -= 1
                self.closed_count += 1
                continue
            self._due.push(entry.next_due(self.config), ref)
        if now >= self._next_sweep:
            self._forget_tombstones(touched, now)
        return emitted

    def _emit(self, entry: OpenInteraction, out: StepOutput) -> bool:
        """Append the entry's record if its content changed; say whether it did."""
        record = compute_record(entry.copies, self.config, entry.revision + 1)
        digest = content_hash(record)
        entry.dirty = False
        if digest == entry.emitted_hash:
            return False
        entry.revision += 1
        entry.emitted_hash = digest
        out.records.append(record)
        return True

    def _forget_tombstones(self, touched: dict[str, Entry | None], now: int) -> None:
        """Drop ids remembered long enough. A scan, but a rare one (see ``_sweep_every``)."""
        for key, raw in self.store.items():
            if not key.startswith(_INTERACTION_PREFIX) or b'"x"' not in raw:
                continue
            entry = decode(raw)
            ref = key[len(_INTERACTION_PREFIX) :]
            if (
                isinstance(entry, Tombstone)
                and entry.partition == self.partition
                and now >= entry.forget_due(self.config)
                and ref not in touched
            ):
                touched[ref] = None
                self.closed_count -= 1
        for interaction_id, tombstone in list(self._legacy_closed.items()):
            if now >= tombstone.forget_due(self.config):
                self.store.delete(LEGACY_PREFIX + interaction_id)
                del self._legacy_closed[interaction_id]
                self.closed_count -= 1
        self._next_sweep = now + self._sweep_every()

    def _sweep_every(self) -> int:
        """A tenth of the memory span: a tombstone lives at most 110% of it."""
        return max(1, self.config.remember_closed_s // 10) * US_PER_S
