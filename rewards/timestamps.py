"""RFC 3339 timestamps <-> integer microseconds since the Unix epoch, UTC.

The reward function compares and orders instants many millions of times during a replay; integers
make that exact and cheap, and each timestamp is parsed once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ingest.contract.timestamps import format_ts

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)
_parse = datetime.fromisoformat
US_PER_S = 1_000_000


def to_us(value: str | datetime | int) -> int:
    """Microseconds since the epoch of an RFC 3339 string, an aware datetime or an int (as is).

    A timestamp without an offset is read as UTC (the contract requires one; the server's own
    clock is UTC).

    >>> to_us("1970-01-01T00:00:01.5Z"), to_us("1970-01-01T02:00:00+02:00")
    (1500000, 0)
    """
    if isinstance(value, str):
        try:
            moment = _parse(value)
        except ValueError:  # RFC 3339 allows a lower-case "t" and "z"
            moment = _parse(value.upper())
    elif isinstance(value, int):
        return value
    else:
        moment = value
    if moment.tzinfo is None:
        return (moment - _NAIVE_EPOCH) // _ONE_US
    return (moment - EPOCH) // _ONE_US


def to_datetime(us: int) -> datetime:
    """The aware UTC datetime of an instant in microseconds."""
    return EPOCH + timedelta(microseconds=us)


def format_us(us: int) -> str:
    """The contract's canonical form (UTC, microseconds, ``Z``) of an instant in microseconds.

    >>> format_us(1500000)
    '1970-01-01T00:00:01.500000Z'
    """
    return format_ts(to_datetime(us))


def canonical(value: str | datetime | int) -> str:
    """The canonical string of an instant; a string already canonical is returned as is.

    Canonical strings compare as their instants do (fixed width, UTC), so the reward function
    orders and windows them without parsing: events from the topic are canonical already (the
    collector normalises them), and only other forms pay for a parse.

    >>> canonical("2026-11-30T02:23:05.123456Z"), canonical("2026-11-30T03:23:05.1+01:00")
    ('2026-11-30T02:23:05.123456Z', '2026-11-30T02:23:05.100000Z')
    """
    if value.__class__ is str and len(value) == 27 and value[26] == "Z" and value[10] == "T":  # type: ignore[arg-type,index]
        return value  # type: ignore[return-value]
    return format_us(to_us(value))
