"""Fast acceptance of valid events: msgspec decodes and checks an event in one C pass.

The msgspec types are built from the same table the reference validator walks (``events``): one
tagged Struct per (origin, event type), unknown fields forbidden, each field kind mapped to a
msgspec type with the kind's own limits. msgspec is only trusted to say yes: ``accept`` returns
the normalized event when the reference validator would return exactly that dict, and None on
any doubt (a rejection, an input form it does not handle, a rule msgspec cannot express failing),
so that every error comes from the reference path with its exact reason, field and detail.

The result is ``orjson.loads`` of the same bytes (the reference's decoder: same key order, same
values, and what orjson refuses goes to the reference), with the kinds that normalize
(timestamps, numbers) normalized as the reference does.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
import orjson

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
from ingest.contract.timestamps import MAX_YEAR, MIN_YEAR, normalize_ts

__all__ = ["accept"]

_ORIGINS = ("client", "collected")  # the values of validate.Origin (not imported: no cycle)

# Plain inputs (ASCII, no backslash, none of _SCANNED) skip the regex of each negated character
# class ("no control character", "no '@' either"): JSON strings carry control characters only as
# escapes, and the printable ASCII ones such a class refuses are scanned for in the whole input.
# Positive classes ("letters, digits and _ . : - only") keep their regex in msgspec.
_ESCAPE, _DEL = "\\", "\x7f"


def _scanned_class(char_class: str) -> str | None:
    """The printable ASCII characters a negated class refuses; None for a positive class."""
    if not char_class.startswith("[^"):
        return None
    match = re.compile(char_class).fullmatch
    return "".join(chr(code) for code in range(32, 128) if not match(chr(code)))


def _annotation(field: Field, name: str, *, plain: bool) -> object:
    """The msgspec type of one field kind; a kind without one fails at import, never silently."""
    if isinstance(field, Text):
        pattern = None
        if not plain or _scanned_class(field.char_class) is None:
            pattern = f"\\A{_python_class(field.char_class)}*\\Z"  # search() of all of it
        meta = msgspec.Meta(min_length=field.min_len, max_length=field.max_len, pattern=pattern)
        return Annotated[str, meta]  # lengths in code points, as len()
    if isinstance(field, Integer):  # msgspec refuses true/false, 1.0 and 1e2 as an int
        return Annotated[int, msgspec.Meta(ge=field.minimum, le=field.maximum)]
    if isinstance(field, Number):  # rechecked and made a float by the reference check
        return Annotated[float, msgspec.Meta(ge=field.minimum, le=field.maximum)]
    if isinstance(field, Flag):
        return bool
    if isinstance(field, Choice):
        return Literal[field.choices]  # type: ignore[valid-type]
    if isinstance(field, Version):
        return Literal[field.version]  # type: ignore[valid-type]
    if isinstance(field, Timestamp):
        # A gate: msgspec's C parser proves the date exists and the digits and separators are
        # in place; accept and _normalize_ts check what it is laxer about.
        return datetime
    if isinstance(field, Record):
        return _struct(f"{name}_record", field.fields, field.required, plain=plain)
    raise TypeError(f"no msgspec form for field kind {type(field).__name__}")


def _python_class(char_class: str) -> str:
    """The class as ``Text`` matches it in Python: lone surrogates excluded too."""
    if char_class.startswith("[^"):
        return char_class[:-1] + "\\ud800-\\udfff]"
    return char_class


def _texts(fields: Mapping[str, Field]) -> Iterator[Text]:
    for field in fields.values():
        if isinstance(field, Text):
            yield field
        elif isinstance(field, Record):
            yield from _texts(field.fields)


def _scanned() -> str:
    """Every character plain inputs must not contain."""
    texts = [*_texts(ENVELOPE), *(text for rec in PAYLOADS.values() for text in _texts(rec.fields))]
    refused = {_scanned_class(text.char_class) or "" for text in texts}
    return "".join(sorted(set(_ESCAPE + _DEL + "".join(refused))))


_SCANNED = _scanned()
_SCANNED_BYTES = tuple(map(ord, _SCANNED))  # int needles: bytes.__contains__ uses memchr


def _struct(
    name: str,
    fields: Mapping[str, Field],
    required: tuple[str, ...],
    *,
    plain: bool,
    tag: str | None = None,
) -> type[msgspec.Struct]:
    specs: list[tuple[str, object] | tuple[str, object, object]] = []
    for field_name, field in fields.items():
        annotation = _annotation(field, f"{name}_{field_name}", plain=plain)
        if field_name in required:
            specs.append((field_name, annotation))
        else:
            # Absent stays absent in the result (taken from orjson), so any default does;
            # msgspec never checks a default against the type (an explicit null is refused).
            specs.append((field_name, annotation, None))
    options: dict[str, Any] = {"kw_only": True, "forbid_unknown_fields": True, "gc": False}
    if tag is not None:
        options.update(tag_field="type", tag=tag)
    return msgspec.defstruct(name.replace(".", "_"), specs, **options)


def _event_struct(origin: str, event_type: str, *, plain: bool) -> type[msgspec.Struct]:
    fields = {name: field for name, field in ENVELOPE.items() if name != "type"}  # the tag
    fields["payload"] = PAYLOADS[event_type]
    required = tuple(name for name in REQUIRED if name != "type")
    if origin == "client":
        del fields[COLLECTOR_FIELD]  # an unknown field to msgspec: refused
    else:
        required += (COLLECTOR_FIELD,)
    return _struct(f"{origin}_{event_type}", fields, required, plain=plain, tag=event_type)


def _kind_names(fields: Mapping[str, Field], kind: type) -> tuple[str, ...]:
    return tuple(name for name, field in fields.items() if isinstance(field, kind))


def _refuse_nested(fields: Mapping[str, Field], where: str) -> None:
    """Normalizing kinds are handled in the envelope and payloads only: fail loudly otherwise."""
    for name, field in fields.items():
        if isinstance(field, Record):
            if _kind_names(field.fields, Timestamp) or _kind_names(field.fields, Number):
                raise TypeError(f"{where}{name}: the fast path normalizes no nested record")
            _refuse_nested(field.fields, f"{where}{name}.")


_TIMESTAMPS = _kind_names(ENVELOPE, Timestamp)
_refuse_nested(ENVELOPE, "")
if _kind_names(ENVELOPE, Number):
    raise TypeError("the fast path normalizes numbers in payloads only")
for _event_type, _record in PAYLOADS.items():
    _refuse_nested(_record.fields, f"{_event_type}.payload.")
    if _kind_names(_record.fields, Timestamp):
        raise TypeError("the fast path normalizes timestamps in the envelope only")


NumberCheck = tuple[str, str, Callable[[Any, str], object]]
"""A payload number: its name, its dotted path, the reference check (range, float)."""


class _Decoder:
    """The msgspec decoder of one origin, and per event type its struct and payload numbers."""

    def __init__(self, origin: str, *, plain: bool) -> None:
        structs = {kind: _event_struct(origin, kind, plain=plain) for kind in PAYLOADS}
        union = functools.reduce(operator.or_, structs.values())  # tagged on "type"
        self.decode = msgspec.json.Decoder(union).decode
        self.timestamps = tuple(
            name for name in _TIMESTAMPS if origin != "client" or name != COLLECTOR_FIELD
        )
        self.by_type: dict[str, tuple[type, tuple[NumberCheck, ...]]] = {
            kind: (
                structs[kind],
                tuple(
                    (name, f"payload.{name}", record.fields[name].check)
                    for name in _kind_names(record.fields, Number)
                ),
            )
            for kind, record in PAYLOADS.items()
        }


_PLAIN = {origin: _Decoder(origin, plain=True) for origin in _ORIGINS}
_STRICT = {origin: _Decoder(origin, plain=False) for origin in _ORIGINS}


def accept(raw: bytes | bytearray | memoryview | str, origin: str) -> dict[str, object] | None:
    """The normalized event if ``raw`` (already size-checked) is valid; None when unsure."""
    if type(raw) is bytes:
        scanned: Sequence[Any] = _SCANNED_BYTES
    elif type(raw) is str:
        scanned = _SCANNED
    else:
        return None  # bytearray, memoryview, subclasses: rare, the reference handles them
    plain = raw.isascii()
    if plain:
        for needle in scanned:
            if needle in raw:
                plain = False
                break
    decoder = (_PLAIN if plain else _STRICT).get(origin)
    if decoder is None:
        return None
    try:
        decoded = decoder.decode(raw)
        event = orjson.loads(raw)
        struct, number_checks = decoder.by_type[event["type"]]
        # With duplicate keys msgspec checks every occurrence and orjson keeps the last: the
        # struct must be the one for the type orjson kept.
        if type(decoded) is not struct:
            return None
        for name in decoder.timestamps:
            text = event.get(name)
            # Canonical already (the common case), given msgspec's parse: see _normalize_ts.
            if text is not None and not (
                len(text) == _CANONICAL_LENGTH
                and text[10::16] == "TZ"  # the separator, and the zone at the end
                and _YEAR_FLOOR <= text < _YEAR_CEILING
            ):
                event[name] = _normalize_ts(text, name)
        for name, dotted, check in number_checks:
            payload = event["payload"]
            if name in payload:
                payload[name] = check(payload[name], dotted)
    except Exception:  # any doubt: the reference decides, and explains
        return None
    return event


# --- timestamps ------------------------------------------------------------------------------

_YEAR_FLOOR, _YEAR_CEILING = str(MIN_YEAR), str(MAX_YEAR + 1)  # compared with 4 ASCII digits
_CANONICAL_LENGTH = len("2026-11-30T02:23:05.123456Z")
_MICROS_END = _CANONICAL_LENGTH - 1  # where the 6th fraction digit ends
_FRACTION_END = len("2026-11-30T02:23:05.123456789")  # the reference allows 9 digits
# By where the fraction ends: what makes it 6 digits (longer ones are cut at _MICROS_END).
_FRACTION_PADDING = {19: ".000000"} | {
    end: "0" * max(0, _MICROS_END - end) for end in range(21, _FRACTION_END + 1)
}
# UTC strings with 1 to 5 fraction digits, by length: the digits they lack, and the zone.
_UTC_TAILS = {_MICROS_END + 1 - digits: "0" * digits + "Z" for digits in range(1, 6)}
_MINUTES_CACHE_SIZE = 4096
_utc_minutes: dict[str, str] = {}


def _normalize_ts(text: str, path: str) -> str:
    """``normalize_ts`` of a timestamp msgspec parsed; raises ContractError where it does.

    msgspec's parse proves the shape ``YYYY-MM-DD?HH:MM:SS[.digits]zone`` (``?`` being ``T``,
    ``t`` or a space; the zone ``Z``, ``z`` or an offset with or without a colon), ASCII digits,
    each number in its range and the date existing. ``normalize_ts`` also wants ``T`` or ``t``,
    an offset with a colon, at most 9 fraction digits and years 2000..2100 as written and in UTC.

    With ``T`` and ``Z``, that is the year and the length, and the result is sliced as
    ``normalize_ts`` slices it. Otherwise, past the fraction's length, it all depends on the
    text up to the minute and on the zone, as do the UTC date, hour and minute: the reference
    decides them once per minute and zone (for second 00), and seconds and fraction are copied,
    the fraction cut to microseconds as ``datetime`` does.
    """
    if text[-1] == "Z" and text[10] == "T" and _YEAR_FLOOR <= text < _YEAR_CEILING:
        tail = _UTC_TAILS.get(len(text))
        if tail is not None:
            return text[:-1] + tail
    end = len(text) - (1 if text[-1] in "Zz" else 6)  # where the seconds or fraction end
    if not (end == 19 or (20 < end <= _FRACTION_END and text[19] == ".")):
        return normalize_ts(text, path)  # raises the reference's error
    key = text[:16] + text[end:]
    minute = _utc_minutes.get(key)
    if minute is None:
        if len(_utc_minutes) >= _MINUTES_CACHE_SIZE:
            _utc_minutes.clear()
        minute = normalize_ts(f"{text[:16]}:00{text[end:]}", path)[:16]  # raises if refused
        _utc_minutes[key] = minute
    seconds = text[16 : end if end < _MICROS_END else _MICROS_END]  # ":ss" and up to 6 digits
    return f"{minute}{seconds}{_FRACTION_PADDING[end]}Z"
