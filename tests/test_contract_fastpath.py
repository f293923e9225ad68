"""The msgspec fast path gives exactly the reference's answer for every input.

``parse_event`` (fast path, reference on any doubt) is compared with ``parse_event_reference``
(the hand-written checks alone): the same normalized dict (keys, key order, values and their
types) or the same ContractError (reason, field, detail). Valid events must really take the fast
path, or the comparison would prove nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.contract import fastpath
from ingest.contract.events import COLLECTOR_FIELD, ENVELOPE, MAX_EVENT_BYTES, PAYLOADS, REQUIRED
from ingest.contract.fields import (
    Choice,
    Field,
    Flag,
    Integer,
    Number,
    Record,
    Text,
    Timestamp,
    Version,
)
from ingest.contract.reasons import ContractError
from ingest.contract.timestamps import normalize_ts
from ingest.contract.validate import Origin, parse_event, parse_event_reference

GOLDEN = Path(__file__).parent / "golden" / "events"
VALID_FILES = sorted((GOLDEN / "valid").glob("*.json"))
INVALID_FILES = sorted((GOLDEN / "invalid").glob("*.json"))
EXAMPLES = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Raw = bytes | bytearray | memoryview | str


def typed(value: object) -> object:
    """A value with its type at every level and dict keys in order, for exact comparison."""
    if isinstance(value, dict):
        return (dict, [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return (list, [typed(item) for item in value])
    return (type(value), value)


def outcome(parse: Any, raw: Raw, origin: Origin, tenant: str | None) -> tuple[object, ...]:
    try:
        return ("ok", typed(parse(raw, origin=origin, tenant=tenant)))
    except ContractError as error:
        return ("error", type(error.reason), error.reason, error.field, error.detail)


def assert_same(raw: Raw, origin: Origin, tenant: str | None = None) -> tuple[object, ...]:
    """Fast and reference agree on ``raw``; returns the verdict."""
    reference = outcome(parse_event_reference, raw, origin, tenant)
    assert outcome(parse_event, raw, origin, tenant) == reference
    return reference


def golden_event(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def as_client(event: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in event.items() if name != COLLECTOR_FIELD}


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
                b"true", b"1.0", b"4.2e1", b"-0", b"-1", b"1e400", b"NaN", b"Infinity", b"null",
                b"9007199254740991", b"9007199254740992", b"18446744073709551616", b'"42"',
            )
        ),
        *(
            RETENTION.replace(b'"retained_fraction":0.857', b'"retained_fraction":' + number)
            for number in (
                b"true", b"1.0", b"0", b"1", b"1e0", b"0.99999999999999999999", b"-0.0", b"2",
                b"1.00000000000000000001", b"1.0000000000000002", b"1e-400", b"-1e-400", b"null",
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
        "2026-11-30T02:23:05Z", "2026-11-30T02:23:05.1Z", "2026-11-30T02:23:05.123456789Z",
        "2026-11-30T02:23:05.1234567890Z", "2026-11-30t02:23:05.5z", "2026-11-30 02:23:05Z",
        "2026-11-30T02:23:05+0100", "2026-11-30T02:23:05+01", "2026-11-30T02:23:05.Z",
        "2026-11-30T02:23:05.123+23:59", "2026-11-30T02:23:05-23:59", "2026-11-30T02:23:05+24:00",
        "2026-11-30T02:23:60Z", "2026-11-30T24:00:00Z", "2026-02-29T00:00:00Z",
        "2028-02-29T00:00:00.000000Z", "2100-02-29T00:00:00Z", "2000-02-29T12:00:00Z",
        "2000-01-01T00:30:00+01:00", "2000-01-01T00:30:00.000000Z", "1999-12-31T23:30:00-01:00",
        "2100-12-31T23:59:59.999999Z", "2100-12-31T23:30:00-01:00", "2101-01-01T00:30:00+01:00",
        "2026-11-30T02:23:05.123456Z\n", "2026-11-30T02:23:05.123456", "2026-04-31T00:00:00Z",
        "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-11-30T02:23:05.12345\u0665Z",
        "2026-11-30T02:23:05.9999999-00:00", "2026-11-30T02:23:05.000001+05:45",
        "1999-12-31T23:59:59.999999Z", "2101-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999Z",
        "1999-12-31T23:59:59.9Z", "2101-01-01T00:00:00.123456789Z", "0001-01-01T00:00:00.000000Z",
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


# --- generated events ------------------------------------------------------------------------

FAR_FUTURE = datetime(2100, 12, 31, 23, 59, 59, 999999)
EVEN_LATER = datetime(2101, 1, 1, 12)


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """Timestamps in every accepted form, some just outside the accepted range."""
    moment = draw(
        st.sampled_from(
            [datetime(2000, 1, 1), datetime(2000, 2, 29, 12), datetime(2100, 12, 31, 23, 30)]
        )
        | st.datetimes(min_value=datetime(1999, 12, 31, 22), max_value=EVEN_LATER)
    )
    minutes = draw(st.sampled_from([0, 60, -60, 330, -570, 1439, -1439]) | st.integers(-1439, 1439))
    local = moment + timedelta(minutes=minutes)
    digits = draw(st.integers(0, 9))
    fraction = f"{local.microsecond:06d}{draw(st.integers(0, 999)):03d}"[:digits]
    zone = draw(st.sampled_from(["Z", "z", "+00:00", "-00:00"])) if minutes == 0 else (
        f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    )
    separator = draw(st.sampled_from("TTTt"))
    text = f"{local:%Y-%m-%d}{separator}{local:%H:%M:%S}"
    return text + (f".{fraction}" if digits else "") + zone


def canonical(moment: datetime) -> str:
    return moment.replace(tzinfo=UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def texts(field: Text) -> st.SearchStrategy[str]:
    chars = field.char_class
    short = st.from_regex(f"{chars}{{{field.min_len},8}}", fullmatch=True)
    ascii_short = st.from_regex(f"(?a:[a-z0-9_.:-]{{{max(field.min_len, 1)},12}})", fullmatch=True)
    edges = st.sampled_from(["a" * field.max_len, "b" * field.min_len, "\u00e9" * field.max_len])
    return ascii_short | ascii_short | short | edges


def values(field: Field) -> st.SearchStrategy[Any]:
    """Valid values of one field kind (drawn from the table, the way an emitter would)."""
    if isinstance(field, Text):
        return texts(field)
    if isinstance(field, Integer):
        return st.integers(field.minimum, field.minimum + 1000) | st.sampled_from(
            [field.minimum, field.maximum]
        )
    if isinstance(field, Number):
        return st.floats(field.minimum, field.maximum) | st.sampled_from(
            [0, 1, 0.0, 1.0, -0.0, 0.5, 1e-300]
        )
    if isinstance(field, Flag):
        return st.booleans()
    if isinstance(field, Choice):
        return st.sampled_from(field.choices)
    if isinstance(field, Version):
        return st.just(field.version)
    if isinstance(field, Timestamp):
        return timestamps() | st.datetimes(datetime(1999, 12, 31), EVEN_LATER).map(canonical)
    if isinstance(field, Record):
        return records(field.fields, field.required)
    raise TypeError(field)


def records(fields: dict[str, Field], required: tuple[str, ...]) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {name: values(fields[name]) for name in required},
        optional={name: values(field) for name, field in fields.items() if name not in required},
    ).flatmap(lambda record: st.permutations(list(record)).map(
        lambda order: {name: record[name] for name in order}
    ))


@st.composite
def valid_events(draw: st.DrawFn) -> tuple[dict[str, Any], Origin]:
    origin = draw(st.sampled_from(Origin))
    event_type = draw(st.sampled_from(list(PAYLOADS)))
    envelope = {name: f for name, f in ENVELOPE.items() if name not in ("type", "payload")}
    required = [name for name in REQUIRED if name in envelope]
    if origin == Origin.collected:
        required.append(COLLECTOR_FIELD)
    else:
        del envelope[COLLECTOR_FIELD]
    event = draw(records(envelope, tuple(required)))
    record = PAYLOADS[event_type]
    event["type"] = event_type
    event["payload"] = draw(records(record.fields, record.required))
    order = draw(st.permutations(list(event)))
    return {name: event[name] for name in order}, origin


def serialize(event: dict[str, Any], form: str) -> Raw:
    if form == "orjson":
        try:
            return orjson.dumps(event)
        except TypeError:  # an integer beyond 64 bits
            return json.dumps(event).encode("utf-8")
    if form == "ascii-str":
        return json.dumps(event)  # non-ASCII as \u escapes
    if form == "utf8-bytes":
        return json.dumps(event, ensure_ascii=False).encode("utf-8")
    if form == "indented-str":
        return json.dumps(event, ensure_ascii=False, indent=1)
    return memoryview(json.dumps(event).encode("utf-8"))


FORM_NAMES = ("orjson", "ascii-str", "utf8-bytes", "indented-str", "view")
FORMS = st.sampled_from(FORM_NAMES)


@EXAMPLES
@given(generated=valid_events(), tenant=st.sampled_from([None, "org", "own"]))
def test_generated_events_take_the_fast_path_with_the_reference_result(
    generated: tuple[dict[str, Any], Origin], tenant: str | None
) -> None:
    event, origin = generated
    for form in FORM_NAMES:
        raw = serialize(event, form)
        verdict = assert_same(raw, origin, event["org_id"] if tenant == "own" else tenant)
        if verdict[0] == "ok" and form != "view":
            assert fastpath.accept(raw, origin) is not None


NASTY = (
    st.none()
    | st.booleans()
    | st.sampled_from([0, -1, 1, 1.0, 0.5, -0.0, 1e300, 2**53 - 1, 2**53, 2**63, 2**64])
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "a@b", "a\x7f", "a\nb", "\x00", "x" * 129, "\u00e9", "edit.accepted"])
    | st.sampled_from(["2026-11-30T02:23:05+0100", "2026-11-30 02:23:05Z", "2026-02-30T00:00:00Z"])
    | timestamps()
    | st.text(max_size=10)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.sampled_from(["name", "arm", "edit_id", "x"]), st.text(max_size=3))
)


def paths(event: dict[str, Any]) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, value in event.items():
        found.append((name,))
        if isinstance(value, dict):
            found.extend((name, inner) for inner in value)
    return found


@st.composite
def mutated_events(draw: st.DrawFn) -> tuple[Raw, Origin]:
    event, origin = draw(valid_events())
    for _ in range(draw(st.integers(1, 2))):
        action = draw(st.sampled_from(["set", "set", "drop", "add", "type", "origin"]))
        path = draw(st.sampled_from(paths(event)))
        target = event if len(path) == 1 else event[path[0]]
        if not isinstance(target, dict):
            continue
        if action == "set":
            target[path[-1]] = draw(NASTY)
        elif action == "drop":
            target.pop(path[-1], None)
        elif action == "add":
            target[draw(st.sampled_from(["x", "received_at", "type", "Type", "mode", "tool"]))] = (
                draw(NASTY)
            )
        elif action == "type":
            event["type"] = draw(st.sampled_from(list(PAYLOADS)))
        else:
            origin = Origin.client if origin == Origin.collected else Origin.collected
    raw = serialize(event, draw(FORMS))
    if isinstance(raw, str | bytes) and draw(st.booleans()):
        raw = duplicate_key(raw, draw(st.sampled_from(["type", "ts", "org_id", "event_id"])),
                            draw(NASTY), first=draw(st.booleans()))
    return raw, origin


def duplicate_key(raw: str | bytes, key: str, value: object, *, first: bool) -> str | bytes:
    """The event with ``key`` also set to ``value`` before or after its own members."""
    member = json.dumps({key: value})[1:-1]
    text = raw if isinstance(raw, str) else raw.decode("utf-8")
    text = text.strip()
    joined = "{" + member + ", " + text[1:] if first else text[:-1] + ", " + member + "}"
    return joined if isinstance(raw, str) else joined.encode("utf-8")


@settings(EXAMPLES, max_examples=1000)
@given(mutated=mutated_events())
def test_mutated_events_fail_or_pass_alike(mutated: tuple[Raw, Origin]) -> None:
    raw, origin = mutated
    for tenant in (None, "acme", "acme-robotics"):
        assert_same(raw, origin, tenant)
    assert_same(raw, Origin.client if origin == Origin.collected else Origin.collected)


@EXAMPLES
@given(raw=st.binary(max_size=300) | st.text(max_size=300), origin=st.sampled_from(Origin))
def test_arbitrary_input_fails_alike(raw: bytes | str, origin: Origin) -> None:
    assert_same(raw, origin)


def test_days_near_the_year_bounds_in_utc() -> None:
    """Offsets move the year across 2000 and 2100 within a day of the bounds."""
    for start in (date(1999, 12, 31), date(2100, 12, 31)):
        for hour in range(0, 24, 3):
            for offset in ("+05:00", "-05:00", "Z", "+23:59", "-23:59"):
                text = f"{start}T{hour:02d}:30:00.5{offset}"
                for later in (text, text.replace(str(start), str(start + timedelta(days=1)))):
                    assert_same(orjson.dumps(edit_proposed(ts=later)), Origin.collected)
