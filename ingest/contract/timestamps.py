"""Strict RFC 3339 timestamps: parse with a mandatory offset, format in one canonical UTC form.

Every timestamp the platform stores is canonical (``2026-11-30T02:23:05.123456Z``): UTC,
microseconds, ``Z``. Canonical strings sort lexicographically in time order, which the stream and
the warehouse rely on.

Accepted on input: ``YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm)``, ``T``/``Z`` in either
case (RFC 3339 allows both), 1 to 9 fraction digits (truncated to microseconds), years 2000..2100
both as written and in UTC (anything else is a broken clock or a unit mix-up). Rejected: no
offset (naive), a date without a time, a space instead of ``T``, leap second ``:60`` (Python
cannot represent it), impossible dates.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from ingest.contract.reasons import ContractError, Reason

MIN_YEAR = 2000
MAX_YEAR = 2100

# One pattern, usable both by Python's ``re`` and as a JSON Schema (ECMA 262) ``pattern``.
# `(?!\n)` after `$`: Python's `$` also matches before a final newline, ECMA 262's does not.
TIMESTAMP_PATTERN = (
    "^(?:20[0-9]{2}|2100)-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    "[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:[.][0-9]{1,9})?"
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$(?!\\n)"
)
_STRICT = re.compile(TIMESTAMP_PATTERN)
_CANONICAL_LENGTH = len("2026-11-30T02:23:05.123456Z")
# Only used to explain a rejection: the general shape without the range limits.
_SHAPE = re.compile(r"([0-9]{4})-[0-9]{2}-[0-9]{2}[Tt ][0-9:.]+(.*)", re.ASCII)


def _diagnose(text: str) -> str:
    """Say what is wrong with a string that failed the strict pattern (error path only)."""
    shape = _SHAPE.fullmatch(text)
    if shape is None:
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text, re.ASCII):
            return f"date without a time: {text!r}"
        return f"not an RFC 3339 timestamp: {text!r}"
    year, offset = int(shape.group(1)), shape.group(2)
    if not MIN_YEAR <= year <= MAX_YEAR:
        return f"year {year} outside {MIN_YEAR}..{MAX_YEAR}: {text!r}"
    if offset == "":
        return f"no UTC offset (add 'Z' or '+hh:mm'): {text!r}"
    if " " in text:
        return f"'T' must separate date and time: {text!r}"
    return f"not an RFC 3339 timestamp: {text!r}"


def parse_ts(text: str, field: str | None = None) -> datetime:
    """Parse a strict RFC 3339 timestamp into an aware UTC datetime.

    Raises ContractError(bad_timestamp) on anything else; ``field`` names it in the error.

    >>> parse_ts("2026-11-30T03:23:05.123+01:00")
    datetime.datetime(2026, 11, 30, 2, 23, 5, 123000, tzinfo=datetime.timezone.utc)
    >>> parse_ts("2026-11-30T02:23:05")
    Traceback (most recent call last):
    ...
    ingest.contract.reasons.ContractError: bad_timestamp: no UTC offset (add 'Z' or '+hh:mm'): ...
    """
    return _parse_utc(text, field)


def _parse_utc(text: str, field: str | None) -> datetime:
    if not isinstance(text, str):
        raise ContractError(Reason.wrong_type, field, "a timestamp must be a string")
    if _STRICT.fullmatch(text) is None:
        raise ContractError(Reason.bad_timestamp, field, _diagnose(text))
    try:
        # fromisoformat (C, fast) accepts everything the pattern lets through, in upper case.
        lower_case = text[10] == "t" or text[-1] == "z"
        parsed = datetime.fromisoformat(text.upper() if lower_case else text)
    except ValueError:
        detail = f"no such date or time: {text!r}"
        raise ContractError(Reason.bad_timestamp, field, detail) from None
    moment = parsed.astimezone(UTC)
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        # Within a day of the bounds an offset can move the year: the UTC instant decides, so
        # that every canonical form this module produces is accepted again.
        detail = f"year {moment.year} in UTC outside {MIN_YEAR}..{MAX_YEAR}: {text!r}"
        raise ContractError(Reason.bad_timestamp, field, detail)
    return moment


def format_ts(moment: datetime) -> str:
    """The canonical form: UTC, microseconds, ``Z``. Naive datetimes are refused.

    >>> from datetime import timedelta, timezone
    >>> format_ts(datetime(2026, 11, 30, 3, 23, 5, 123000, tzinfo=timezone(timedelta(hours=1))))
    '2026-11-30T02:23:05.123000Z'
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("refusing a naive datetime: its time zone is unknown")
    # isoformat of an aware UTC datetime always ends in "+00:00" (faster than strftime).
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def normalize_ts(text: str, field: str | None = None) -> str:
    """Validate a timestamp string and return its canonical form.

    >>> normalize_ts("2026-11-30t02:23:05z"), normalize_ts("2026-11-30T02:23:05.1234567Z")
    ('2026-11-30T02:23:05.000000Z', '2026-11-30T02:23:05.123456Z')
    """
    moment = _parse_utc(text, field)
    if text[-1] == "Z" and text[10] == "T":
        # UTC already (the common case): only the fraction may need padding or truncating.
        if len(text) == _CANONICAL_LENGTH:
            return text
        fraction = text[20:-1]
        return f"{text[:19]}.{fraction[:6]:0<6}Z"
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


_this_second: tuple[int, str] = (-1, "")  # a second since the epoch, formatted to the second


def now_ts() -> str:
    """The current time in canonical form (what ``format_ts`` gives for ``datetime.now(UTC)``),
    the date and time of day formatted once a second: it stamps every rollout the gateway
    records, where building a datetime for each took more than the rest of the stamp."""
    global _this_second
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    formatted_second, prefix = _this_second
    if second != formatted_second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _this_second = (second, prefix)
    return f"{prefix}.{micros:06d}Z"
