"""From a request body to what goes where, with no I/O: pure, so it is tested without a broker.

``decode_body`` undoes gzip within a size bound and splits ``{"events": [...]}`` into the events'
own bytes (msgspec reads the envelope of the batch and leaves each event encoded), so that each
event is decoded and checked once, by the contract's ``parse_event`` and its fast path; a body
msgspec refuses is parsed again by orjson for the exact reason. ``plan_batch`` validates each
event (origin ``client``, tenant of the API key), sets ``received_at`` on the valid ones and turns
the invalid ones into DLQ records. One bad event never affects the others.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
import orjson

from ingest.contract import ContractError, Origin, Reason, parse_event, validate_event


class BatchReason(enum.StrEnum):
    """Why a whole request was refused (event-level codes are ``ingest.contract.Reason``)."""

    unauthorized = "unauthorized"
    rate_limited = "rate_limited"
    body_too_large = "body_too_large"
    too_many_events = "too_many_events"
    unsupported_encoding = "unsupported_encoding"
    bad_encoding = "bad_encoding"
    not_json = "not_json"
    too_deep = "too_deep"
    bad_batch = "bad_batch"
    unavailable = "unavailable"


class BatchRefused(Exception):
    def __init__(self, status: int, reason: BatchReason, detail: str) -> None:
        super().__init__(f"{status} {reason}: {detail}")
        self.status = status
        self.reason = reason
        self.detail = detail


class OutRecord(NamedTuple):  # one per event: a tuple is cheaper to make than a dataclass
    topic: str
    key: bytes | None
    value: bytes


@dataclass(frozen=True)
class BatchPlan:
    records: list[OutRecord]
    """Valid events for the events topic, then DLQ records: all must be acknowledged."""
    results: list[dict[str, Any]]
    """One answer per event, in the batch's order."""
    accepted: int
    rejections: list[str]
    """The reason code of each rejected event (for metrics)."""


class _Batch(msgspec.Struct):
    events: list[msgspec.Raw]


_BATCH = msgspec.json.Decoder(_Batch)


def decode_body(body: bytes, content_encoding: str | None, max_bytes: int) -> list[Any]:
    """The ``events`` array of a request body, each event still encoded (``msgspec.Raw``).

    >>> [bytes(e) for e in decode_body(b'{"events": [{"a": 1}, 2]}', None, 100)]
    [b'{"a": 1}', b'2']
    >>> decode_body(b'{"events": 3}', None, 100)
    Traceback (most recent call last):
    ...
    ingest.collector.batch.BatchRefused: 400 bad_batch: the body must be {"events": [...]}
    >>> decode_body(b'{"events": [' + b'[' * 200_000 + b']' * 200_000 + b']}', None, 10**6)
    Traceback (most recent call last):
    ...
    ingest.collector.batch.BatchRefused: 400 too_deep: JSON nested too deep
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "gzip":
        body = _gunzip(body, max_bytes)
    elif encoding != "identity":
        raise BatchRefused(
            415,
            BatchReason.unsupported_encoding,
            f"Content-Encoding {encoding!r}; use gzip or none",
        )
    try:
        return _BATCH.decode(body).events
    except msgspec.DecodeError:
        pass  # refused below with orjson's reason, or accepted by it as parsed objects
    except RecursionError:  # msgspec recurses into nested values, even ones it only skips
        raise BatchRefused(400, BatchReason.too_deep, "JSON nested too deep") from None
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        reason = BatchReason.too_deep if "depth limit" in str(exc) else BatchReason.not_json
        raise BatchRefused(400, reason, str(exc)[:200]) from None
    if not isinstance(document, dict) or not isinstance(document.get("events"), list):
        raise BatchRefused(400, BatchReason.bad_batch, 'the body must be {"events": [...]}')
    return document["events"]


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BatchRefused(400, BatchReason.bad_encoding, f"bad gzip data: {exc}") from None
    if len(out) > max_bytes:
        raise BatchRefused(
            413, BatchReason.body_too_large, f"more than {max_bytes} bytes once decompressed"
        )
    if not inflater.eof:
        raise BatchRefused(400, BatchReason.bad_encoding, "truncated gzip data")
    return out


def plan_batch(
    events: list[Any],
    tenant: str,
    received_at: str,
    events_topic: str,
    dlq_topic: str,
    max_events: int,
) -> BatchPlan:
    """Validate every event (encoded, as from ``decode_body``, or parsed) and say where each goes.

    >>> plan = plan_batch([{"event_id": "e1"}], "acme", "2026-11-30T02:23:05.000000Z",
    ...                   "telemetry.events", "telemetry.dlq", 10)
    >>> plan.accepted, plan.results[0]["reason"], plan.records[0].topic
    (0, 'missing_field', 'telemetry.dlq')
    """
    if len(events) > max_events:
        raise BatchRefused(
            413,
            BatchReason.too_many_events,
            f"{len(events)} events; at most {max_events} per request",
        )
    accepted: list[OutRecord] = []
    dead: list[OutRecord] = []
    results: list[dict[str, Any]] = []
    rejections: list[str] = []
    for index, item in enumerate(events):
        try:
            if isinstance(item, msgspec.Raw):
                event = parse_event(bytes(item), origin=Origin.client, tenant=tenant)
            else:
                event = validate_event(item, origin=Origin.client, tenant=tenant)
        except ContractError as err:
            raw, event_id = _as_rejected(item)
            status = 403 if err.reason == Reason.tenant_mismatch else 400
            results.append(
                {
                    "index": index,
                    "event_id": event_id,
                    "accepted": False,
                    "status": status,
                    **err.to_dict(),
                }
            )
            rejections.append(str(err.reason))
            dead.append(
                OutRecord(
                    dlq_topic,
                    None,
                    orjson.dumps(
                        {**err.to_dict(), "raw": raw, "received_at": received_at, "org_id": tenant}
                    ),
                )
            )
            continue
        event["received_at"] = received_at
        accepted.append(
            OutRecord(events_topic, str(event["interaction_id"]).encode(), orjson.dumps(event))
        )
        results.append(
            {"index": index, "event_id": event["event_id"], "accepted": True, "status": 202}
        )
    return BatchPlan(accepted + dead, results, len(accepted), rejections)


def _as_rejected(item: Any) -> tuple[Any, str | None]:
    """A rejected event as the DLQ keeps it (its own JSON, or the text of what is not JSON),
    and its ``event_id`` when it has a string one."""
    raw = item
    if isinstance(item, msgspec.Raw):
        encoded = bytes(item)
        try:
            item = orjson.loads(encoded)
            raw = orjson.Fragment(encoded)
        except orjson.JSONDecodeError:
            item = raw = encoded.decode("utf-8", "replace")
    event_id = item.get("event_id") if isinstance(item, dict) else None
    return raw, event_id if isinstance(event_id, str) else None
