"""The fast path against the reference on generated input: valid events in every accepted form,
the same events mutated one field at a time, and arbitrary bytes and text."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.contract import fastpath
from ingest.contract.events import COLLECTOR_FIELD, ENVELOPE, PAYLOADS, REQUIRED
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
from ingest.contract.validate import Origin
from tests.ingest.fastpath import (
    EXAMPLES,
    Raw,
    assert_same,
)

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
    zone = (
        draw(st.sampled_from(["Z", "z", "+00:00", "-00:00"]))
        if minutes == 0
        else (f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}")
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
    ).flatmap(
        lambda record: st.permutations(list(record)).map(
            lambda order: {name: record[name] for name in order}
        )
    )


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
        raw = duplicate_key(
            raw,
            draw(st.sampled_from(["type", "ts", "org_id", "event_id"])),
            draw(NASTY),
            first=draw(st.booleans()),
        )
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
