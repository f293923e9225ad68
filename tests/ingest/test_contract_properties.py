"""Properties: any input fails only with ContractError, the schema and the validator agree on
mutated events, timestamps round-trip, UUIDv7 ids are unique and time-ordered."""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_verdict
from hypothesis import strategies as st

from ingest.contract import (
    EVENT_TYPES,
    ContractError,
    Origin,
    format_ts,
    normalize_ts,
    now_ts,
    parse_event,
    parse_ts,
    uuid7,
    validate_event,
)
from ingest.contract.events import ENVELOPE
from ingest.contract.ids import uuid7_unix_ms
from ingest.contract.schema import SCHEMA_PATH

GOLDEN_VALID = sorted((Path(__file__).parents[1] / "golden" / "events" / "valid").glob("*.json"))
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=6)
    ),
    max_leaves=30,
)


# Objects with the envelope's own keys get past the first checks and reach the deeper ones.
envelope_like = st.dictionaries(
    st.sampled_from(list(ENVELOPE)),
    json_values | st.sampled_from(EVENT_TYPES) | st.just(1) | st.just("2026-11-30T02:23:05Z"),
    max_size=len(ENVELOPE),
)


@EXAMPLES
@given(value=json_values | envelope_like, origin=st.sampled_from(Origin))
def test_arbitrary_json_only_ever_raises_contract_error(value: object, origin: Origin) -> None:
    for attempt in (
        lambda: validate_event(value, origin=origin),
        lambda: parse_event(orjson.dumps(value), origin=origin),
    ):
        try:
            attempt()
        except ContractError:
            pass


@EXAMPLES
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_only_ever_raise_contract_error(raw: bytes) -> None:
    try:
        parse_event(raw, origin=Origin.client)
    except ContractError:
        pass


# Values that JSON Schema and the validator must judge alike. Integral floats (1.0) and
# impossible calendar dates are the documented blind spots of the schema, so they are left out.
probe_values: st.SearchStrategy[object] = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        -1,
        7,
        2**53,
        0.5,
        1.5,
        -0.25,
        "",
        "x",
        "a@b.example",
        "tab\tin",
        "e" * 65,
        "i" * 129,
        "agent",
        "chat",
        "edit.accepted",
        "2026-11-30T02:23:05Z",
        "2026-11-30T02:23:05",
        "1999-01-01T00:00:00Z",
        [],
        {},
        {"name": "n", "arm": "a"},
        {"name": "n", "version": "v"},
        {"edit_id": "e"},
    ]
) | st.text(max_size=8)


def _paths(event: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for key, value in event.items():
        found.append((*prefix, key))
        if isinstance(value, dict):
            found.extend(_paths(value, (*prefix, key)))
    return found


@st.composite
def mutated_events(draw: st.DrawFn) -> tuple[dict, Origin]:
    event = json.loads(draw(st.sampled_from(GOLDEN_VALID)).read_text())
    origin = draw(st.sampled_from(Origin))
    if origin is Origin.client and draw(st.booleans()):
        del event["received_at"]
    for _ in range(draw(st.integers(min_value=1, max_value=2))):
        path = draw(st.sampled_from(_paths(event)))
        parent = event
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = copy.deepcopy(draw(probe_values))  # never mutate the samples
        elif action == "delete":
            del parent[path[-1]]
        else:
            key = draw(st.sampled_from(["extra", "mode", "tool", "arm"]))
            parent[key] = copy.deepcopy(draw(probe_values))
    return event, origin


def _schema_validators() -> dict[Origin, jsonschema.Draft202012Validator]:
    schema = json.loads(SCHEMA_PATH.read_text())
    collected = {"$ref": "#/$defs/collected_event", "$defs": schema["$defs"]}
    return {
        Origin.client: jsonschema.Draft202012Validator(schema),
        Origin.collected: jsonschema.Draft202012Validator(collected),
    }


VALIDATORS = _schema_validators()


@EXAMPLES
@given(case=mutated_events())
def test_json_schema_and_validator_agree_on_mutated_events(case: tuple[dict, Origin]) -> None:
    event, origin = case
    try:
        validate_event(copy.deepcopy(event), origin=origin)
        accepted = True
    except ContractError:
        accepted = False
    assert VALIDATORS[origin].is_valid(event) == accepted
    note_verdict("accepted" if accepted else "rejected")  # see --hypothesis-show-statistics


offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


@EXAMPLES
@given(
    moment=st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2100, 12, 30)),
    zone=offsets,
    upper=st.booleans(),
)
def test_timestamp_round_trip(moment: datetime, zone: timezone, upper: bool) -> None:
    aware = moment.replace(tzinfo=zone)
    text = aware.isoformat()
    text = text if upper else text.lower()
    parsed = parse_ts(text)
    assert parsed == aware and parsed.tzinfo is UTC
    canonical = format_ts(aware)
    assert parse_ts(canonical) == aware
    assert format_ts(parse_ts(canonical)) == canonical


@EXAMPLES
@given(
    moment=st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2100, 12, 30)),
    digits=st.text(alphabet="0123456789", min_size=0, max_size=9),
    suffix=st.sampled_from(["Z", "z", "+00:00", "-00:00", "+05:30", "-11:00"]),
)
def test_normalize_ts_agrees_with_parse_then_format(
    moment: datetime, digits: str, suffix: str
) -> None:
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{digits}" if digits else "") + suffix
    canonical = normalize_ts(text)
    assert canonical == format_ts(parse_ts(text))
    assert normalize_ts(canonical) == canonical


def test_canonical_timestamps_sort_in_time_order() -> None:
    base = datetime(2026, 11, 30, 23, 59, 59, 999999, tzinfo=UTC)
    moments = [base + timedelta(microseconds=step * 7919) for step in range(-500, 500)]
    texts = [format_ts(moment) for moment in moments]
    assert sorted(texts) == texts


def test_format_ts_refuses_naive_and_now_ts_is_canonical() -> None:
    with pytest.raises(ValueError):
        format_ts(datetime(2026, 11, 30))
    for _ in range(3):  # across a second's turn too
        before = datetime.now(UTC)
        stamps = [now_ts() for _ in range(2_000)]
        after = datetime.now(UTC)
        assert all(normalize_ts(s) == s for s in stamps)  # canonical
        assert stamps == sorted(stamps)
        assert before - timedelta(microseconds=1) <= parse_ts(stamps[0])
        assert parse_ts(stamps[-1]) <= after + timedelta(microseconds=1)
        time.sleep(0.4)


def test_uuid7_is_unique_and_increasing_within_a_process() -> None:
    ids = [uuid7() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    parsed = uuid.UUID(ids[0])
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_uuid7_carries_its_creation_time() -> None:
    before = time.time_ns() // 1_000_000
    first = uuid7()
    time.sleep(0.003)
    second = uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= uuid7_unix_ms(first) < uuid7_unix_ms(second) <= after
    assert first < second


def test_uuid7_is_unique_across_threads() -> None:
    results: list[list[str]] = [[] for _ in range(4)]

    def make(bucket: list[str]) -> None:
        bucket.extend(uuid7() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(bucket,)) for bucket in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for bucket in results for value in bucket]
    assert len(set(every)) == len(every)
    assert all(bucket == sorted(bucket) for bucket in results)


def test_uuid7_is_a_valid_event_id() -> None:
    event = json.loads(GOLDEN_VALID[0].read_text())
    event["event_id"] = uuid7()
    validate_event(event, origin=Origin.collected)
