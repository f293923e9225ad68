"""The stream's state machine without a broker: a list of events in, a list of records out.

The same flow runs on a real broker in ``test_streams_worker.py``.
"""

from __future__ import annotations

import random

import orjson
import pytest

from rewards.config import RewardConfig
from rewards.timestamps import US_PER_S, format_us, to_us
from rewards.workload import generate_workload
from streams.processor import Incoming, PartitionProcessor, interaction_key, pending_key
from streams.state import Arrival, OpenInteraction, Tombstone, decode
from tests.streams.support import (
    PAST_START,
    DictStore,
    batch_records,
    chunks,
    latest_revisions,
    partition_of,
)

CONFIG = RewardConfig()
FAR_FUTURE_US = to_us("2027-01-01T00:00:00Z")


def _incoming(event: dict) -> Incoming:
    return Incoming(event, orjson.dumps(event))


def _stream(events: list[dict], config: RewardConfig, chunk: int = 500,
            store: DictStore | None = None,
            **options: int) -> tuple[list[dict], list, DictStore]:  # fmt: skip
    """Events in arrival order through six partitions' processors, then an idle tick each."""
    store = DictStore() if store is None else store
    procs = {p: PartitionProcessor(p, config, store, **options) for p in range(6)}
    _stream.processors = procs  # type: ignore[attr-defined]
    records: list[dict] = []
    late: list = []
    for part in chunks(events, chunk):
        by_partition: dict[int, list[Incoming]] = {}
        for event in part:
            by_partition.setdefault(partition_of(event["interaction_id"]), []).append(
                _incoming(event)
            )
        for p, items in by_partition.items():
            out = procs[p].step(items, wall_us=0)
            records += [r.to_json_dict() for r in out.records]
            late += out.late
            procs[p].published()
    for _ in range(1000):  # the idle rule: the wall clock closes, then purges, everything
        emitted = 0
        for proc in procs.values():
            out = proc.step([], wall_us=0, idle_wall_us=FAR_FUTURE_US)
            records += [r.to_json_dict() for r in out.records]
            emitted += len(out.records)
            proc.published()
        if not emitted and not any(proc.open_count for proc in procs.values()):
            break
    return records, late, store


def test_stream_equals_batch_on_a_messy_workload() -> None:
    # events: generated collected events in arrival order (duplicates, late, orphans, privacy)
    events = generate_workload(800, seed=3, start=PAST_START)
    records, late, store = _stream(events, CONFIG)
    # records: RewardRecord.to_json_dict() with revision, several per interaction
    latest, problems = latest_revisions(records)
    assert problems == []
    assert latest == batch_records(events, CONFIG)
    assert any(r["revision"] > 0 for r in records), "the workload has corrections"
    # windows with valid and invalid calls together: n_tool_calls is not n_invalid_tool_calls
    both = [r for r in latest.values() if r["n_tool_calls"] > r["n_invalid_tool_calls"] > 0]
    assert both, "the workload has windows with valid and invalid tool calls"
    assert {a for _, a in late} >= {Arrival.late, Arrival.expired}
    # after the idle tick everything is closed: only tombstones remain
    assert all(isinstance(decode(v), Tombstone) for k, v in store.items() if k.startswith("t/"))


@pytest.mark.parametrize("capacity", [2, 5, 12])
def test_deadlines_beyond_memory_change_no_record(capacity: int) -> None:
    """With few deadlines in memory the processor rescans its store, and emits the same."""
    events = generate_workload(400, seed=5, start=PAST_START)
    expected, _, _ = _stream(events, CONFIG, chunk=61)
    got, _, _ = _stream(events, CONFIG, chunk=61, deadlines_in_memory=capacity)
    assert sum(p.rescans for p in _stream.processors.values()) > 0  # type: ignore[attr-defined]
    key = lambda r: (r["interaction_id"], r["revision"])  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)


def test_shuffled_chunks_and_redelivery_change_nothing() -> None:
    events = generate_workload(300, seed=11, start=PAST_START)
    # the same copies delivered twice in a row (a redelivery) are one copy
    doubled = [e for event in events for e in (event, dict(event))]
    records, _, _ = _stream(doubled, CONFIG, chunk=97)
    latest, problems = latest_revisions(records)
    assert problems == []
    assert latest == batch_records(events, CONFIG)


def test_a_crash_between_state_and_publication_republishes_the_same_record() -> None:
    config = RewardConfig(window_s=10, late_s=10, grace_s=1, remember_closed_s=3600)
    t0 = to_us(PAST_START)
    base = {
        "schema_version": 1,
        "interaction_id": "i1",
        "session_id": "s",
        "user_id": "u",
        "org_id": "o",
        "checkpoint_id": "c",
    }

    def ev(eid: str, at_s: float, type_: str = "interaction.started", payload=None) -> Incoming:
        at = format_us(t0 + int(at_s * US_PER_S))
        return _incoming(
            {
                **base,
                "event_id": eid,
                "type": type_,
                "ts": at,
                "received_at": at,
                "payload": payload or {},
            }
        )

    store = DictStore()
    proc = PartitionProcessor(0, config, store)
    assert proc.step([ev("e1", 0)], wall_us=0).records == []
    out = proc.step([ev("e2", 12, "agent.clarifying_question")], wall_us=0)  # clock past t_close
    assert [r.revision for r in out.records] == [0]
    assert orjson.loads(store[pending_key(0)]) == [["o", "i1"]]
    # the worker dies here: the state is durable, the record maybe not
    survivor = PartitionProcessor(0, config, DictStore(store))
    republished = survivor.recover()
    assert [r.to_json_dict() for r in republished] == [out.records[0].to_json_dict()]
    survivor.published()
    # the input since the last commit comes again: no new revision
    again = survivor.step([ev("e1", 0), ev("e2", 12, "agent.clarifying_question")], wall_us=0)
    assert again.records == [] and [a for _, a in again.late] == [Arrival.late]


def test_expired_ids_are_remembered_then_forgotten() -> None:
    config = RewardConfig(window_s=10, late_s=10, grace_s=1, remember_closed_s=100)
    t0 = to_us(PAST_START)
    event = {
        "schema_version": 1,
        "interaction_id": "i9",
        "session_id": "s",
        "user_id": "u",
        "org_id": "o",
        "checkpoint_id": "c",
        "event_id": "a",
        "type": "interaction.started",
        "ts": PAST_START,
        "received_at": PAST_START,
        "payload": {},
    }
    store = DictStore()
    proc = PartitionProcessor(0, config, store)
    proc.step([_incoming(event)], wall_us=0)
    proc.step([], wall_us=0, idle_wall_us=t0 + 25 * US_PER_S)  # emits (clean after this)
    proc.step([], wall_us=0, idle_wall_us=t0 + 25 * US_PER_S)  # purges
    assert isinstance(decode(store[interaction_key("o", "i9")]), Tombstone)
    again = {**event, "event_id": "b", "received_at": format_us(t0 + 50 * US_PER_S)}
    out = proc.step([_incoming(again)], wall_us=0)
    assert [a for _, a in out.late] == [Arrival.closed] and out.records == []
    proc._next_sweep = 0  # sweeps are rare; force one
    proc.step([], wall_us=0, idle_wall_us=t0 + 200 * US_PER_S)
    assert interaction_key("o", "i9") not in store
    reopened = proc.step(
        [_incoming({**again, "received_at": format_us(t0 + 201 * US_PER_S)})], wall_us=0
    )
    assert reopened.late == []
    assert isinstance(decode(store[interaction_key("o", "i9")]), OpenInteraction)


@pytest.mark.parametrize("seed", [1, 2])
def test_records_are_capped_per_step_and_none_is_lost(seed: int, monkeypatch) -> None:
    monkeypatch.setattr("streams.processor.MAX_RECORDS_PER_STEP", 7)
    events = generate_workload(120, seed=seed, start=PAST_START)
    random.Random(seed).shuffle(events)  # arrival order broken: t_open moves backwards
    records, _, _ = _stream(events, CONFIG, chunk=1000)
    latest, problems = latest_revisions(records)
    assert problems == []
    assert set(latest) == {e["interaction_id"] for e in events}


class LoggedStore(DictStore):
    """A dict store that also keeps the order of its writes (a changelog partition)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.log: list[tuple[str, bytes | None]] = []

    def put(self, key: str, value: bytes) -> None:
        super().put(key, value)
        self.log.append((key, value))

    def delete(self, key: str) -> None:
        super().delete(key)
        self.log.append((key, None))


def test_any_durable_prefix_of_a_step_recovers_without_gaps_or_conflicts() -> None:
    # one partition; a crash in the middle of chunk 3, after some of its writes were durable
    config = RewardConfig()
    events = [
        e
        for e in generate_workload(200, seed=9, start=PAST_START)
        if partition_of(e["interaction_id"]) == 0
    ]
    parts = list(chunks([_incoming(e) for e in events], 40))
    store = LoggedStore()
    proc = PartitionProcessor(0, config, store)
    published: list[dict] = []
    for part in parts[:3]:
        out = proc.step(part, wall_us=0)
        published += [r.to_json_dict() for r in out.records]
        proc.published()
    durable_before = DictStore(store)
    mark = len(store.log)
    crashed = proc.step(parts[3], wall_us=0)
    assert crashed.records, "the crashed step emits records (else the test proves nothing)"
    step_writes = store.log[mark:]
    for cut in range(len(step_writes) + 1):
        survivor_store = DictStore(durable_before)
        for key, value in step_writes[:cut]:
            if value is None:
                survivor_store.delete(key)
            else:
                survivor_store.put(key, value)
        survivor = PartitionProcessor(0, config, survivor_store)
        records = list(published) + [r.to_json_dict() for r in survivor.recover()]
        survivor.published()
        for part in parts[3:]:  # the input since the last commit comes again
            records += [r.to_json_dict() for r in survivor.step(part, wall_us=0).records]
            survivor.published()
        for _ in range(5):
            records += [
                r.to_json_dict() for r in survivor.step([], 0, idle_wall_us=FAR_FUTURE_US).records
            ]
            survivor.published()
        latest, problems = latest_revisions(records)
        assert problems == [], (cut, problems[:3])
        assert latest == batch_records(events, config), cut
