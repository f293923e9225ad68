"""The workload generator: deterministic, valid per events-v1, and as messy as production."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import datetime

import pytest

from ingest.contract import EVENT_TYPES, Origin, validate_event
from rewards.config import RewardConfig
from rewards.function import compute_record
from rewards.timestamps import US_PER_S, to_us
from rewards.workload import generate_workload

RFC3339_UTC_US = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(scope="module")
def workload() -> list[dict]:
    return generate_workload(1500, seed=5)


def test_same_seed_same_events_other_seed_other_events(workload):
    assert generate_workload(1500, seed=5) == workload
    assert generate_workload(1500, seed=6) != workload


def test_every_event_is_valid_and_all_types_appear(workload):
    for event in workload:
        validate_event(event, origin=Origin.collected)
        assert RFC3339_UTC_US.match(event["received_at"])
    assert set(Counter(e["type"] for e in workload)) == set(EVENT_TYPES)
    assert 8 <= len(workload) / 1500 <= 12


def test_events_come_in_arrival_order_out_of_ts_order(workload):
    received = [to_us(e["received_at"]) for e in workload]
    assert received == sorted(received)
    ts = [to_us(e["ts"]) for e in workload]
    assert ts != sorted(ts)
    assert all(RFC3339_UTC_US.match(e["ts"]) for e in workload)  # as the collector normalises


def test_timestamps_as_clients_send_them_mean_the_same_instants():
    as_sent = generate_workload(200, seed=5, ts_as_sent=True)
    normalised = generate_workload(200, seed=5)
    assert any(not e["ts"].endswith("Z") for e in as_sent)  # clients' local offsets
    assert [to_us(e["ts"]) for e in as_sent] == [to_us(e["ts"]) for e in normalised]
    for event in as_sent:
        validate_event(event, origin=Origin.collected)


def test_production_mess_is_present(workload):
    config = RewardConfig()
    by_interaction = defaultdict(list)
    for event in workload:
        by_interaction[event["interaction_id"]].append(event)
    records = [compute_record(events, config) for events in by_interaction.values()]
    assert sum(r.n_duplicates for r in records) > 0
    assert sum(r.n_late for r in records) > 0
    assert sum(r.n_orphans for r in records) > 0
    assert sum(r.censor_reason == "privacy_mode" for r in records) > 0
    assert sum(r.censor_reason == "no_outcome" for r in records) > 0
    assert {r.checkpoint_id for r in records} >= {"ckpt-0001", "ckpt-0002", "ckpt-0003"}
    assert {r.experiment_arm for r in records} == {"control", "treatment", None}
    expired = 0
    for events in by_interaction.values():
        t_open = min(to_us(e["received_at"]) for e in events)
        limit = t_open + (config.window_s + config.late_s) * US_PER_S
        expired += sum(to_us(e["received_at"]) >= limit for e in events)
    assert expired > 0


def test_workload_starts_where_asked():
    events = generate_workload(10, seed=1, start="2027-01-01T00:00:00Z", span_s=60)
    first = datetime.fromisoformat(events[0]["received_at"])
    assert first.year == 2027


def test_records_do_not_depend_on_the_form_of_the_timestamps():
    config = RewardConfig()

    def records(events):
        by_interaction = defaultdict(list)
        for event in events:
            by_interaction[event["interaction_id"]].append(event)
        return [compute_record(group, config) for group in by_interaction.values()]

    as_sent = generate_workload(200, seed=8, ts_as_sent=True)
    assert records(as_sent) == records(generate_workload(200, seed=8))
