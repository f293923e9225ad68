"""Strict validation of one event: bytes or an object in, a normalized dict or ContractError out.

Hand-written checks driven by the table in ``events`` (measured faster than a pydantic model here,
and every failure maps to exactly one Reason). Normalization is small and lossless for downstream
use: timestamps become canonical UTC strings, ``retained_fraction`` a float, str subclasses plain
str. Optional fields stay absent when absent (``privacy_mode`` absent means false).

Which error wins when an event has several: ``schema_version`` first (another version has other
fields), then ``received_at`` against the origin, unknown fields, missing fields, then each field in
the event's own order, the payload last.
"""

from __future__ import annotations

import enum

import orjson

from ingest.contract import fastpath
from ingest.contract.events import (
    COLLECTOR_FIELD,
    ENVELOPE,
    EVENT_TYPES,
    MAX_EVENT_BYTES,
    PAYLOADS,
    REQUIRED,
)
from ingest.contract.fields import json_type_name, unknown_field_error
from ingest.contract.reasons import ContractError, Reason

__all__ = [
    "EVENT_TYPES",
    "MAX_EVENT_BYTES",
    "Origin",
    "check_tenant",
    "parse_event",
    "parse_event_reference",
    "validate_event",
]


class Origin(enum.StrEnum):
    """Where an event is in its journey, which decides the rule for ``received_at``."""

    client = "client"
    """What an emitter sends to the collector: ``received_at`` is forbidden."""
    collected = "collected"
    """What is on ``telemetry.events``: ``received_at`` is required."""


_ENVELOPE_NAMES = frozenset(ENVELOPE)
_CHECKS = {name: field.check for name, field in ENVELOPE.items() if name != "payload"}
_PAYLOAD_CHECKS = {name: record.check for name, record in PAYLOADS.items()}
_CHECK_VERSION = ENVELOPE["schema_version"].check


def validate_event(obj: object, *, origin: Origin, tenant: str | None = None) -> dict[str, object]:
    """Check a parsed event against the contract and return its normalized copy.

    ``tenant``, when given, is the API key's tenant that ``org_id`` must equal.

    >>> event = validate_event({
    ...     "event_id": "0193a1f2-7c4e-7b1a-9d2e-1f2a3b4c5d6e", "type": "edit.accepted",
    ...     "schema_version": 1, "ts": "2026-11-30T03:23:05.1+01:00", "interaction_id": "i-1",
    ...     "session_id": "s-1", "user_id": "u-9f8e", "org_id": "acme", "checkpoint_id": "ck-7",
    ...     "payload": {"edit_id": "e-1"}}, origin=Origin.client)
    >>> event["ts"]
    '2026-11-30T02:23:05.100000Z'
    >>> validate_event({**event, "payload": {}}, origin=Origin.client)
    Traceback (most recent call last):
    ...
    ingest.contract.reasons.ContractError: missing_field at payload.edit_id: required
    """
    if not isinstance(obj, dict):
        raise ContractError(
            Reason.not_object, None, f"an event is a JSON object, got {json_type_name(obj)}"
        )
    if "schema_version" in obj:
        _CHECK_VERSION(obj["schema_version"], "schema_version")
    _check_origin(obj, origin)
    if not obj.keys() <= _ENVELOPE_NAMES:
        raise unknown_field_error(None, obj, _ENVELOPE_NAMES)
    for name in REQUIRED:
        if name not in obj:
            raise ContractError(Reason.missing_field, name, "required")

    checks = _CHECKS
    event: dict[str, object] = {}
    for name, value in obj.items():  # the payload keeps its place; it is checked once type is
        event[name] = value if name == "payload" else checks[name](value, name)
    event["payload"] = _PAYLOAD_CHECKS[event["type"]](obj["payload"], "payload")  # type: ignore[index]
    if tenant is not None:
        check_tenant(event, tenant)
    return event


def _check_origin(obj: dict[object, object], origin: Origin) -> None:
    if origin == Origin.client:
        if COLLECTOR_FIELD in obj:
            raise ContractError(
                Reason.forbidden_field, COLLECTOR_FIELD, "set by the collector, never by a client"
            )
    elif origin == Origin.collected:
        if COLLECTOR_FIELD not in obj:
            raise ContractError(
                Reason.missing_field, COLLECTOR_FIELD, "required on collected events"
            )
    else:
        raise ValueError(f"unknown origin {origin!r}")


def check_tenant(event: dict[str, object], tenant: str) -> None:
    """Reject a valid event whose ``org_id`` is not the tenant of the API key that sent it."""
    if event.get("org_id") != tenant:
        raise ContractError(
            Reason.tenant_mismatch, "org_id", "org_id differs from the API key's tenant"
        )


def parse_event(
    raw: bytes | bytearray | memoryview | str, *, origin: Origin, tenant: str | None = None
) -> dict[str, object]:
    """Size-check, decode and validate one serialized event.

    Valid events take the msgspec fast path (``fastpath``); anything it is unsure of, and every
    invalid event, goes through ``parse_event_reference``, which decides and explains. Both give
    the same answer for every input.

    >>> parse_event(b"[1, 2]", origin=Origin.client)
    Traceback (most recent call last):
    ...
    ingest.contract.reasons.ContractError: not_object: an event is a JSON object, got array
    """
    if type(raw) is not bytes or len(raw) > MAX_EVENT_BYTES:  # bytes within the limit: no call
        _check_size(raw)
    event = fastpath.accept(raw, origin)
    if event is None:
        return _decode_and_validate(raw, origin, tenant)
    if tenant is not None:
        check_tenant(event, tenant)
    return event


def parse_event_reference(
    raw: bytes | bytearray | memoryview | str, *, origin: Origin, tenant: str | None = None
) -> dict[str, object]:
    """``parse_event`` by the hand-written checks alone: orjson, then ``validate_event``.

    The definition of the contract's answers, kept callable so the fast path can be compared.
    """
    _check_size(raw)
    return _decode_and_validate(raw, origin, tenant)


def _check_size(raw: bytes | bytearray | memoryview | str) -> None:
    size = _utf8_size(raw)
    if size > MAX_EVENT_BYTES:
        raise ContractError(
            Reason.too_large, None, f"{size} bytes exceed the limit of {MAX_EVENT_BYTES}"
        )


def _decode_and_validate(
    raw: bytes | bytearray | memoryview | str, origin: Origin, tenant: str | None
) -> dict[str, object]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ContractError(Reason.not_json, None, str(exc)) from None
    return validate_event(obj, origin=origin, tenant=tenant)


def _utf8_size(raw: bytes | bytearray | memoryview | str) -> int:
    if isinstance(raw, str):
        # Each character is 1 to 4 bytes: encode only when the bounds cannot decide.
        if len(raw) > MAX_EVENT_BYTES or len(raw) * 4 <= MAX_EVENT_BYTES:
            return len(raw)
        return len(raw.encode("utf-8", "surrogatepass"))
    if isinstance(raw, memoryview):
        return raw.nbytes
    if isinstance(raw, bytes | bytearray):
        return len(raw)
    raise TypeError(f"an event is bytes or str, got {type(raw).__name__}")
