"""The msgspec fast path gives exactly the reference's answer for every input.

``parse_event`` (fast path, reference on any doubt) is compared with ``parse_event_reference``
(the hand-written checks alone): the same normalized dict (keys, key order, values and their
types) or the same ContractError (reason, field, detail). Valid events must really take the fast
path, or the comparison would prove nothing.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from ingest.contract import fastpath
from ingest.contract.events import MAX_EVENT_BYTES
from ingest.contract.reasons import ContractError
from ingest.contract.timestamps import normalize_ts
from ingest.contract.validate import Origin, parse_event
from tests.ingest.fastpath import (
    GOLDEN,
    INVALID_FILES,
    VALID_FILES,
    Raw,
    as_client,
    assert_same,
    golden_event,
)

# --- golden files ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda path: path.stem)
def test_golden_valid_events_take_the_fast_path_with_the_reference_result(path: Path) -> None:
    event = golden_event(path)
    client = as_client(event)
    cases: list[tuple[Raw, Origin]] = [
        (path.read_bytes(), Origin.collected),
        (path.read_text(encoding="utf-8"), Origin.collected),
        (orjson.dumps(event), Origin.collected),
        (orjson.dumps(client), Origin.client),
        (json.dumps(client), Origin.client),
    ]
    for raw, origin in cases:
        assert fastpath.accept(raw, origin) is not None
        for tenant in (None, event["org_id"], "another-org"):
            assert_same(raw, origin, tenant)
    # The wrong origin, and forms the fast path leaves to the reference.
    assert_same(orjson.dumps(event), Origin.client)
    assert_same(orjson.dumps(client), Origin.collected)
    for raw in (bytearray(path.read_bytes()), memoryview(path.read_bytes())):
        assert fastpath.accept(raw, Origin.collected) is None
        assert assert_same(raw, Origin.collected)[0] == "ok"


@pytest.mark.parametrize("path", INVALID_FILES, ids=lambda path: path.stem)
def test_golden_invalid_events_fail_alike(path: Path) -> None:
    case = golden_event(path)
    if "raw" in case:
        raw: bytes = case["raw"].encode("utf-8")
    else:
        raw = orjson.dumps(case["event"])
        if "pad_to_bytes" in case:
            raw += b" " * (case["pad_to_bytes"] - len(raw))
    origin, tenant = Origin(case.get("origin", "client")), case.get("tenant")
    for form in (raw, raw.decode("utf-8", "replace")):
        verdict = assert_same(form, origin, tenant)
        assert verdict[0] == "error" and verdict[2] == case["reason"]
    for other in Origin:
        assert_same(raw, other)


# --- rules msgspec alone would get wrong -----------------------------------------------------


DEEP = b"[" * 2000 + b"]" * 2000
RETENTION = orjson.dumps(json.loads((GOLDEN / "valid" / "edit.retention.json").read_bytes()))


def edit_proposed(**changes: object) -> dict[str, Any]:
    event = golden_event(GOLDEN / "valid" / "agent.edit_proposed.json")
    event.update(changes)
    return event


@pytest.mark.parametrize(
    "raw",
    [
        # Duplicate keys: msgspec checks each occurrence, orjson keeps the last.
        b'{"type": "agent.tool_call", ' + orjson.dumps(edit_proposed())[1:],
        orjson.dumps(edit_proposed())[:-1] + b', "type": "edit.accepted"}',
        orjson.dumps(edit_proposed())[:-1] + b', "type": "agent.edit_proposed"}',
        orjson.dumps(edit_proposed())[:-1] + b', "org_id": "other-org"}',
        orjson.dumps(edit_proposed())[:-1] + b', "user_id": "a@b"}',
        orjson.dumps(edit_proposed())[:-1] + b', "ts": "2026-11-30T02:23:05+0100"}',
        b'{"org_id": "x\\u0000", ' + orjson.dumps(edit_proposed())[1:],
        # Characters only some inputs can carry: escapes, DEL, '@', non-ASCII, lone surrogates.
        orjson.dumps(edit_proposed(session_id="a\nb")),
        orjson.dumps(edit_proposed(session_id="a\x7fb")),
        orjson.dumps(edit_proposed(session_id="a@b")),
        orjson.dumps(edit_proposed(user_id="a@b")),
        orjson.dumps(edit_proposed(user_id="caf\u00e9@b")),
        orjson.dumps(edit_proposed(event_id="caf\u00e9")),
        orjson.dumps(edit_proposed(event_id="a/b")),
        orjson.dumps(edit_proposed(event_id="\uff21")),  # a full-width letter is not [A-Za-z]
        json.dumps(edit_proposed(session_id="\u00e9\u4e2d\U0001f600")).encode(),
        json.dumps(edit_proposed(session_id="\u00e9" * 128)).encode(),
        json.dumps(edit_proposed(session_id="\u00e9" * 129)).encode(),
        json.dumps(edit_proposed(session_id="\ud800")).encode(),
        json.dumps(edit_proposed(session_id="\ud83d\ude00")).encode(),
        b'{"event_id": "\\u0041", ' + orjson.dumps(edit_proposed())[1:],
        orjson.dumps(edit_proposed()).replace(b"sess-", b"sess\\/"),
        # Numbers: bools, integral floats, exponents, the safe-integer edge, beyond 64 bits.
        *(
            orjson.dumps(edit_proposed()).replace(b'"lines_added":42', b'"lines_added":' + number)
            for number in (
                b"true",
                b"1.0",
                b"4.2e1",
                b"-0",
                b"-1",
                b"1e400",
                b"NaN",
                b"Infinity",
                b"null",
                b"9007199254740991",
                b"9007199254740992",
                b"18446744073709551616",
                b'"42"',
            )
        ),
        *(
            RETENTION.replace(b'"retained_fraction":0.857', b'"retained_fraction":' + number)
            for number in (
                b"true",
                b"1.0",
                b"0",
                b"1",
                b"1e0",
                b"0.99999999999999999999",
                b"-0.0",
                b"2",
                b"1.00000000000000000001",
                b"1.0000000000000002",
                b"1e-400",
                b"-1e-400",
                b"null",
            )
        ),
        orjson.dumps(edit_proposed(schema_version=True)),
        orjson.dumps(edit_proposed(schema_version=1.0)),
        orjson.dumps(edit_proposed(privacy_mode=1)),
        orjson.dumps(edit_proposed(privacy_mode=None)),
        orjson.dumps(edit_proposed(experiment=None)),
        # Encodings and structure.
        orjson.dumps(edit_proposed()) + b"\xff",
        orjson.dumps(edit_proposed()).replace(b"sess", b"s\xffss"),
        b"\xef\xbb\xbf" + orjson.dumps(edit_proposed()),
        orjson.dumps(edit_proposed()) + b" []",
        orjson.dumps(edit_proposed()).replace(b'"payload":{', b'"payload":{"x":' + DEEP + b","),
        orjson.dumps(edit_proposed()).replace(b'"payload":{', b'"payload":' + DEEP + b',"y":{'),
        orjson.dumps(edit_proposed(privacy_mode=[[[[[[]]]]]])),
    ],
)
def test_inputs_that_msgspec_judges_differently(raw: bytes) -> None:
    for origin in Origin:
        for tenant in (None, "acme-robotics"):
            assert_same(raw, origin, tenant)
    if type(raw) is bytes:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return
        assert_same(text, Origin.collected)


def test_str_input_with_a_lone_surrogate_and_padding() -> None:
    text = json.dumps(edit_proposed(session_id="\ud800"), ensure_ascii=False)
    assert_same(text, Origin.collected)
    event = json.dumps(edit_proposed(session_id="\u00e9"), ensure_ascii=False)
    for size in (MAX_EVENT_BYTES - 1, MAX_EVENT_BYTES, MAX_EVENT_BYTES + 1):
        # 2 bytes in UTF-8 but 1 character: only the encoded size decides.
        padded = event + " " * (size - len(event.encode("utf-8")))
        verdict = assert_same(padded, Origin.collected)
        assert verdict[0] == ("ok" if size <= MAX_EVENT_BYTES else "error")


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-30T02:23:05Z",
        "2026-11-30T02:23:05.1Z",
        "2026-11-30T02:23:05.123456789Z",
        "2026-11-30T02:23:05.1234567890Z",
        "2026-11-30t02:23:05.5z",
        "2026-11-30 02:23:05Z",
        "2026-11-30T02:23:05+0100",
        "2026-11-30T02:23:05+01",
        "2026-11-30T02:23:05.Z",
        "2026-11-30T02:23:05.123+23:59",
        "2026-11-30T02:23:05-23:59",
        "2026-11-30T02:23:05+24:00",
        "2026-11-30T02:23:60Z",
        "2026-11-30T24:00:00Z",
        "2026-02-29T00:00:00Z",
        "2028-02-29T00:00:00.000000Z",
        "2100-02-29T00:00:00Z",
        "2000-02-29T12:00:00Z",
        "2000-01-01T00:30:00+01:00",
        "2000-01-01T00:30:00.000000Z",
        "1999-12-31T23:30:00-01:00",
        "2100-12-31T23:59:59.999999Z",
        "2100-12-31T23:30:00-01:00",
        "2101-01-01T00:30:00+01:00",
        "2026-11-30T02:23:05.123456Z\n",
        "2026-11-30T02:23:05.123456",
        "2026-04-31T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "2026-11-30T02:23:05.12345\u0665Z",
        "2026-11-30T02:23:05.9999999-00:00",
        "2026-11-30T02:23:05.000001+05:45",
        "1999-12-31T23:59:59.999999Z",
        "2101-01-01T00:00:00.000000Z",
        "9999-12-31T23:59:59.999Z",
        "1999-12-31T23:59:59.9Z",
        "2101-01-01T00:00:00.123456789Z",
        "0001-01-01T00:00:00.000000Z",
    ],
)
def test_timestamps_msgspec_parses_differently(text: str) -> None:
    for field in ("ts", "sent_at", "received_at"):
        raw = orjson.dumps(edit_proposed(**{field: text}))
        assert_same(raw, Origin.collected)
        assert_same(json.dumps(as_client(edit_proposed(**{field: text}))), Origin.client)


def test_unknown_origin_is_left_to_the_reference() -> None:
    raw = orjson.dumps(edit_proposed())
    assert fastpath.accept(raw, "elsewhere") is None
    with pytest.raises(ValueError, match="unknown origin"):
        parse_event(raw, origin="elsewhere")  # type: ignore[arg-type]


def test_msgspec_refuses_a_second_type_that_differs() -> None:
    """The invariant the fast path's struct check relies on, kept visible if msgspec changes."""
    decoder = fastpath._PLAIN["collected"]  # noqa: SLF001
    raw = orjson.dumps(edit_proposed())[:-1] + b', "type": "edit.accepted"}'
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(raw)


def test_calendar_of_msgspec_datetimes_matches_the_reference() -> None:
    """Every day from 2000 to 2100 (and impossible ones): msgspec's verdict is the reference's."""
    decode = msgspec.json.Decoder(datetime).decode
    for year in (2000, 2001, 2004, 2024, 2096, 2100):
        for month in range(0, 14):
            for day in range(0, 33):
                text = f"{year}-{month:02d}-{day:02d}T00:00:00.000000Z"
                try:
                    expected = normalize_ts(text) == text
                except ContractError:
                    expected = False
                try:
                    decode(orjson.dumps(text))
                    parsed = True
                except msgspec.ValidationError:
                    parsed = False
                assert parsed == expected, text


def test_days_near_the_year_bounds_in_utc() -> None:
    """Offsets move the year across 2000 and 2100 within a day of the bounds."""
    for start in (date(1999, 12, 31), date(2100, 12, 31)):
        for hour in range(0, 24, 3):
            for offset in ("+05:00", "-05:00", "Z", "+23:59", "-23:59"):
                text = f"{start}T{hour:02d}:30:00.5{offset}"
                for later in (text, text.replace(str(start), str(start + timedelta(days=1)))):
                    assert_same(orjson.dumps(edit_proposed(ts=later)), Origin.collected)
