"""Edge cases of validation that golden files cannot express (bytes, Python objects, limits)."""

from __future__ import annotations

import enum
import pickle
from pathlib import Path

import orjson
import pytest

from ingest.contract import (
    MAX_EVENT_BYTES,
    ContractError,
    Origin,
    Reason,
    check_tenant,
    parse_event,
    validate_event,
)
from ingest.contract.events import ENVELOPE, PAYLOADS

GOLDEN_VALID = Path(__file__).parents[1] / "golden" / "events" / "valid"


def golden(name: str) -> dict:
    return orjson.loads((GOLDEN_VALID / f"{name}.json").read_bytes())


def reason_of(raw: bytes | str | object, origin: Origin = Origin.collected) -> Reason:
    with pytest.raises(ContractError) as caught:
        if isinstance(raw, bytes | str):
            parse_event(raw, origin=origin)
        else:
            validate_event(raw, origin=origin)
    return caught.value.reason


def padded(event: dict, size: int) -> bytes:
    raw = orjson.dumps(event)
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def test_size_limit_is_inclusive() -> None:
    event = golden("edit.accepted")
    assert parse_event(padded(event, MAX_EVENT_BYTES), origin=Origin.collected)
    assert reason_of(padded(event, MAX_EVENT_BYTES + 1)) is Reason.too_large


def test_size_of_str_input_counts_utf8_bytes() -> None:
    event = golden("edit.accepted")
    text = padded(event, MAX_EVENT_BYTES - 3000).decode()
    assert parse_event(text, origin=Origin.collected)
    # 1,000 three-byte characters push the UTF-8 size over the limit, not the character count.
    over = text[:-1] + "\u20ac" * 1100 + "}"
    assert len(over) < MAX_EVENT_BYTES
    assert reason_of(over) is Reason.too_large


@pytest.mark.parametrize(
    "raw",
    [b"", b"\xff\xfe{}", b"{'a': 1}", b'{"a": Infinity}', b"{} {}", b"\xef\xbb\xbf{}"],
    ids=["empty", "utf16", "single-quotes", "infinity", "two-docs", "bom"],
)
def test_undecodable_input_is_not_json(raw: bytes) -> None:
    assert reason_of(raw) is Reason.not_json


def test_accepts_bytearray_memoryview_and_str() -> None:
    raw = (GOLDEN_VALID / "edit.accepted.json").read_bytes()
    expected = parse_event(raw, origin=Origin.collected)
    assert parse_event(bytearray(raw), origin=Origin.collected) == expected
    assert parse_event(memoryview(raw), origin=Origin.collected) == expected
    assert parse_event(raw.decode(), origin=Origin.collected) == expected
    with pytest.raises(TypeError):
        parse_event(123, origin=Origin.collected)  # type: ignore[arg-type]


def test_normalizes_timestamps_and_numbers_without_touching_input() -> None:
    event = golden("edit.retention.whole_fraction")
    event["ts"] = "2026-12-01t07:53:54.001234567+05:30"
    before = orjson.dumps(event)

    result = validate_event(event, origin=Origin.collected)

    assert result["ts"] == "2026-12-01T02:23:54.001234Z"
    payload = result["payload"]
    assert isinstance(payload, dict)
    assert payload["retained_fraction"] == 1.0
    assert type(payload["retained_fraction"]) is float
    assert list(result) == list(event)  # same key order, nothing added
    moved = {"payload": event["payload"], **{k: v for k, v in event.items() if k != "payload"}}
    assert list(validate_event(moved, origin=Origin.collected)) == list(moved)
    assert "privacy_mode" not in result
    assert orjson.dumps(event) == before  # the caller's dict is untouched


def test_str_enum_values_are_accepted_as_plain_strings() -> None:
    class EventType(enum.StrEnum):
        accepted = "edit.accepted"

    event = golden("edit.accepted")
    event["type"] = EventType.accepted
    event["org_id"] = EventType.accepted
    result = validate_event(event, origin=Origin.collected)
    assert type(result["type"]) is str and type(result["org_id"]) is str
    assert orjson.dumps(result)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("privacy_mode", 0, Reason.wrong_type),
        ("privacy_mode", "false", Reason.wrong_type),
        ("schema_version", True, Reason.wrong_type),
        ("schema_version", 0, Reason.bad_schema_version),
        ("org_id", "a" * 129, Reason.out_of_range),
        ("org_id", "a" * 128, None),
        ("event_id", "a" * 64, None),
        ("user_id", "\u00e9t\u00e9-\u4e2d\u6587", None),  # any printable Unicode
        ("session_id", "tab\there", Reason.out_of_range),
        ("session_id", "lone\ud800surrogate", Reason.out_of_range),
        ("ts", "2100-12-31T23:59:59.999999999+23:59", None),
        ("ts", "2100-12-31T23:59:59.999999999-23:59", Reason.bad_timestamp),  # 2101 in UTC
        ("ts", "2101-01-01T00:00:00Z", Reason.bad_timestamp),
        ("ts", "1999-12-31T23:59:59Z", Reason.bad_timestamp),
        ("ts", "2000-01-01T00:30:00+01:00", Reason.bad_timestamp),  # 1999 in UTC
        ("ts", "2000-01-01T00:30:00-01:00", None),
        ("ts", "2026-11-30T02:23:60Z", Reason.bad_timestamp),  # leap second
        ("ts", "2026-11-30T02:23:05.1234567890Z", Reason.bad_timestamp),
        ("ts", "2026-11-30T02:23:05+0100", Reason.bad_timestamp),
        ("ts", "2026-11-30T02:23:05Z\n", Reason.bad_timestamp),
        ("ts", "\u0662\u0660\u0662\u0666-11-30T02:23:05Z", Reason.bad_timestamp),
        ("ts", None, Reason.wrong_type),
    ],
)
def test_envelope_field_rules(field: str, value: object, reason: Reason | None) -> None:
    event = golden("edit.accepted")
    event[field] = value
    if reason is None:
        validate_event(event, origin=Origin.collected)
    else:
        assert reason_of(event) is reason


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.0001, 1.0000001])
def test_retained_fraction_outside_unit_interval(value: float) -> None:
    event = golden("edit.retention")
    event["payload"]["retained_fraction"] = value
    assert reason_of(event) is Reason.out_of_range


def test_counts_up_to_the_safe_integer_limit() -> None:
    event = golden("interaction.completed")
    event["payload"]["latency_ms"] = 2**53 - 1
    validate_event(event, origin=Origin.collected)
    event["payload"]["latency_ms"] = 2**53
    assert reason_of(event) is Reason.out_of_range


def test_schema_version_is_checked_before_anything_else() -> None:
    event = {"schema_version": 2, "entirely": "different"}
    assert reason_of(event) is Reason.bad_schema_version


def test_error_names_the_first_problem_deterministically() -> None:
    event = golden("edit.accepted")
    del event["user_id"]
    event["zzz"] = 1
    with pytest.raises(ContractError) as caught:
        validate_event(event, origin=Origin.collected)
    assert (caught.value.reason, caught.value.field) == (Reason.unknown_field, "zzz")


def test_hostile_field_names_are_clipped_in_errors() -> None:
    event = golden("edit.accepted")
    event["x" * 10_000] = 1
    with pytest.raises(ContractError) as caught:
        validate_event(event, origin=Origin.collected)
    assert len(caught.value.field or "") <= 200 and len(caught.value.detail) <= 200


def test_tenant_check() -> None:
    event = validate_event(golden("edit.accepted"), origin=Origin.collected)
    check_tenant(event, "acme-robotics")
    with pytest.raises(ContractError) as caught:
        check_tenant(event, "initech")
    assert caught.value.to_dict()["reason"] == "tenant_mismatch"
    raw = (GOLDEN_VALID / "edit.accepted.json").read_bytes()
    assert parse_event(raw, origin=Origin.collected, tenant="acme-robotics")["org_id"]


def test_origin_must_be_known() -> None:
    with pytest.raises(ValueError, match="origin"):
        validate_event(golden("edit.accepted"), origin="server")  # type: ignore[arg-type]
    assert validate_event(golden("edit.accepted"), origin="collected")  # type: ignore[arg-type]


def test_contract_error_survives_pickling() -> None:
    error = ContractError(Reason.wrong_type, "payload.valid", "expected a boolean")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, ValueError)
    assert isinstance(copy, ContractError)
    assert copy.to_dict() == error.to_dict()


def test_largest_valid_event_fits_the_size_limit() -> None:
    """Every field is bounded, so a parsed-and-valid event can never exceed MAX_EVENT_BYTES."""
    widest = "\U0001f600" * 128  # 4 UTF-8 bytes each, the worst case for printable text
    event = golden("edit.retention")
    for name in ("interaction_id", "session_id", "user_id", "org_id", "checkpoint_id"):
        event[name] = widest
    event["experiment"] = {"name": widest, "arm": widest}
    event["client"] = {"name": widest, "version": widest}
    event["payload"]["edit_id"] = widest
    event["ts"] = event["sent_at"] = event["received_at"] = "2026-11-30T02:23:05.123456789+05:30"
    event["privacy_mode"] = False
    validate_event(event, origin=Origin.collected)
    assert set(event) == set(ENVELOPE)
    widest_payload = max(len(record.fields) for record in PAYLOADS.values())
    assert len(orjson.dumps(event)) * widest_payload < MAX_EVENT_BYTES
