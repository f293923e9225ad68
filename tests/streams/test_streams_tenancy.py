"""Two organisations sending the same interaction id and user id get two interactions.

Through the partition processor over a dict store, through the worker on the real broker (whose
two records keep apart on the compacted ``rewards`` topic too), and from state written under the
legacy key (the interaction id alone), which is migrated.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson
import polars as pl
import pytest

from infra.topics import TopicNames
from rewards.config import RewardConfig
from rewards.eventio import EVENT_SCHEMA
from rewards.record import frame_to_records
from rewards.replay import replay
from rewards.tenant_keys import rewards_key
from rewards.timestamps import US_PER_S, format_us, to_us
from streams.processor import LEGACY_PREFIX, Incoming, PartitionProcessor, interaction_key
from streams.state import OpenInteraction, Tombstone, decode, encode
from tests.streams.support import PAST_START, DictStore, TopicReader, Workers
from tests.support.kafka import produce_json

CONFIG = RewardConfig(window_s=10, late_s=10, grace_s=1, remember_closed_s=100)
T0 = to_us(PAST_START)


def _event(org: str, event_id: str, at_s: int, type_: str = "interaction.started") -> dict:
    at = format_us(T0 + at_s * US_PER_S)
    return {
        "schema_version": 1,
        "event_id": event_id,
        "type": type_,
        "ts": at,
        "received_at": at,
        "interaction_id": "same-interaction",
        "session_id": "s",
        "user_id": "same-user",
        "org_id": org,
        "checkpoint_id": "c",
        "payload": {},
    }


def _two_orgs() -> list[dict]:
    """Org a: a start and a clarifying question; org b: a start only (censored)."""
    return [
        _event("a", "a1", 0),
        _event("b", "b1", 1),
        _event("a", "a2", 2, "agent.clarifying_question"),
    ]


def _close_all(proc: PartitionProcessor) -> list[dict]:
    out = proc.step([], wall_us=0, idle_wall_us=T0 + 25 * US_PER_S)
    proc.published()
    return [r.to_json_dict() for r in out.records]


def _by_org(records: Iterable[dict]) -> dict[str, dict]:
    return {r["org_id"]: r for r in records}


def _assert_separate(by_org: dict[str, dict]) -> None:
    assert sorted(by_org) == ["a", "b"]
    assert by_org["a"]["event_ids"] == ["a1", "a2"] and by_org["a"]["n_clarifying"] == 1
    assert by_org["b"]["event_ids"] == ["b1"] and by_org["b"]["status"] == "censored"
    assert {r["user_id"] for r in by_org.values()} == {"same-user"}


def test_two_organisations_with_one_interaction_id_are_two_records() -> None:
    store = DictStore()
    proc = PartitionProcessor(0, CONFIG, store)
    proc.step([Incoming(e, orjson.dumps(e)) for e in _two_orgs()], wall_us=0)
    records = _close_all(proc)
    assert len(records) == 2
    _assert_separate(_by_org(records))
    assert interaction_key("a", "same-interaction") in store
    assert interaction_key("b", "same-interaction") in store


def test_legacy_state_is_split_by_organisation_and_its_tombstones_still_close() -> None:
    merged = OpenInteraction(0, T0, _two_orgs(), revision=0, emitted_hash="h", dirty=False)
    store = DictStore(
        {
            LEGACY_PREFIX + "same-interaction": encode(merged),
            LEGACY_PREFIX + "closed": encode(Tombstone(0, T0)),
            LEGACY_PREFIX + "elsewhere": encode(OpenInteraction(3, T0, _two_orgs())),
        }
    )
    proc = PartitionProcessor(0, CONFIG, store)
    assert proc.recover() == [] and (proc.open_count, proc.closed_count) == (2, 1)
    assert LEGACY_PREFIX + "same-interaction" not in store
    assert LEGACY_PREFIX + "elsewhere" in store  # another partition's: its processor migrates it
    parts = {org: decode(store[interaction_key(org, "same-interaction")]) for org in "ab"}
    assert all(isinstance(p, OpenInteraction) and p.revision == 0 for p in parts.values())
    records = _close_all(proc)
    assert {r["revision"] for r in records} == {1}  # each replaces the merged record
    _assert_separate(_by_org(records))
    straggler = {**_event("b", "b9", 20), "interaction_id": "closed"}
    out = proc.step([Incoming(straggler, orjson.dumps(straggler))], wall_us=0)
    assert [a.value for _, a in out.late] == ["closed"]
    proc._next_sweep = 0  # sweeps are rare; force one
    proc.step([], wall_us=0, idle_wall_us=T0 + 200 * US_PER_S)
    assert LEGACY_PREFIX + "closed" not in store and proc.closed_count == 0  # all forgotten


def test_the_replay_agrees_two_organisations_are_two_records() -> None:
    frame = replay(pl.DataFrame(_two_orgs(), schema=EVENT_SCHEMA), CONFIG)
    records = [r.to_json_dict() for r in frame_to_records(frame)]
    assert len(records) == 2
    _assert_separate(_by_org(records))


@pytest.mark.slow
def test_the_worker_keeps_two_organisations_apart(kafka_bootstrap: str, topic_names: TopicNames,
                                                  tmp_path: Path) -> None:  # fmt: skip
    produce_json(
        kafka_bootstrap, topic_names.events, _two_orgs(), key=lambda e: e["interaction_id"]
    )
    reader = TopicReader(kafka_bootstrap, topic_names.rewards)
    workers = Workers(kafka_bootstrap, topic_names, tmp_path)
    try:
        workers.start("w1")
        latest: dict[str, dict] = {}
        for _ in range(60):
            reader.poll(2.0)
            latest = _by_org(reader.values())
            if len(latest) == 2:
                break
        assert len(latest) == 2, f"records by org: {sorted(latest)}\n{workers.logs()}"
        _assert_separate(latest)
        assert len(reader.values()) == 2
        # What compaction keeps, the latest record per key, still holds both organisations'.
        compacted = {m.key(): orjson.loads(m.value()) for m in reader.messages}
        assert sorted(compacted) == [rewards_key(o, "same-interaction") for o in "ab"]
        _assert_separate(_by_org(compacted.values()))
    finally:
        workers.stop_all()
        reader.close()
