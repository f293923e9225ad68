"""OTLP spans and log events (``otlp_decode``'s items) to events-v1 events, with no I/O.

The contract is ``docs/contracts/otlp-v1.md``; in short:

- a span whose ``gen_ai.operation.name`` is a model call (``chat``, ``text_completion``,
  ``generate_content``) is the interaction's model call, one ``interaction.completed`` event:
  ``latency_ms`` is the span's duration, ``output_tokens`` its ``gen_ai.usage.output_tokens``,
  ``ts`` its end, ``checkpoint_id`` the model that answered;
- a log event named ``rtrl.<type>`` is the events-v1 event ``<type>``, each payload field ``f``
  from the attribute ``rtrl.f`` (the tool's name from ``gen_ai.tool.name``);
- every event's envelope comes from the same attributes, the record's own first and then its
  resource's: ``rtrl.interaction.id`` (the gateway's interaction id), else the interaction a
  gateway's ``gen_ai.response.id`` carries (``ingest.contract.response_ids``: every call of one
  agent run lands in the run's interaction, where its rollout is), else the response id itself,
  ``gen_ai.conversation.id`` as the session, ``user.id``, the API key's tenant as ``org_id``;
- any other span or log record is ignored and counted, never refused.

Each event is then checked by the contract exactly as ``POST /v1/events`` checks one
(``validate_event``, origin client, the key's tenant). A refusal keeps the contract's reason code
and names the OTLP field or attribute it came from (``user.id``, not ``user_id``), and goes to
the dead-letter topic with the item as read. The event id is the emitter's ``rtrl.event.id``, or
else derived from the record (a span's trace and span ids; a log record's digest), so an export
retried after a lost answer gives the same ids and is counted once downstream.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ingest.collector.batch import OutRecord
from ingest.contract import (
    SCHEMA_VERSION,
    ContractError,
    Origin,
    Reason,
    format_ts,
    genai,
    validate_event,
)
from ingest.contract.events import PAYLOADS
from ingest.contract.response_ids import interaction_of

Item = dict[str, Any]

MODEL_CALL_TYPE = "interaction.completed"
_ENVELOPE_SOURCES = {
    "interaction_id": f"{genai.RTRL_INTERACTION_ID} or {genai.RESPONSE_ID}",
    "session_id": genai.CONVERSATION_ID,
    "user_id": genai.USER_ID,
    "checkpoint_id": f"{genai.RTRL_CHECKPOINT_ID} or {genai.RESPONSE_MODEL}",
    "experiment": genai.RTRL_EXPERIMENT,
    "privacy_mode": genai.RTRL_PRIVACY_MODE,
    "event_id": genai.RTRL_EVENT_ID,
}
_SPAN_SOURCES = {
    **_ENVELOPE_SOURCES,
    "ts": "endTimeUnixNano",
    "payload.latency_ms": "endTimeUnixNano - startTimeUnixNano",
    "payload.output_tokens": genai.OUTPUT_TOKENS,
}
_LOG_SOURCES = {**_ENVELOPE_SOURCES, "ts": "timeUnixNano", "type": "eventName"}


def payload_attribute(field: str) -> str:
    """The attribute a payload field of an ``rtrl.*`` log event travels in.

    >>> payload_attribute("edit_id"), payload_attribute("tool")
    ('rtrl.edit_id', 'gen_ai.tool.name')
    """
    return genai.TOOL_NAME if field == "tool" else genai.RTRL_ATTRIBUTE_PREFIX + field


KEPT_ATTRIBUTES = frozenset(
    {
        genai.OPERATION_NAME,
        genai.REQUEST_MODEL,
        genai.RESPONSE_MODEL,
        genai.RESPONSE_ID,
        genai.OUTPUT_TOKENS,
        genai.CONVERSATION_ID,
        genai.USER_ID,
        genai.TOOL_NAME,
        genai.EVENT_NAME_ATTRIBUTE,
    }
)


def keep(key: str) -> bool:
    """Whether the mapping reads an attribute (every other one is dropped when decoding)."""
    return key in KEPT_ATTRIBUTES or key.startswith(genai.RTRL_ATTRIBUTE_PREFIX)


@dataclass(frozen=True)
class OtlpPlan:
    records: list[OutRecord]
    """Events for the events topic, then dead-letter records: all must be acknowledged."""
    accepted: int
    rejections: list[str]
    """The reason code of each refused span or log record."""
    ignored: list[str]
    """Why each span or log record that is no rtrl event was left aside."""
    error_message: str
    """For OTLP's partial success: what was refused, by reason and field ("" when nothing)."""


def plan_export(
    items: list[Item], tenant: str, received_at: str, events_topic: str, dlq_topic: str
) -> OtlpPlan:
    """Map, validate and route every item of one export request.

    >>> span = {"signal": "span", "trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "chat",
    ...     "start_time_unix_nano": 1_780_000_000_000_000_000,
    ...     "end_time_unix_nano": 1_780_000_000_250_000_000, "resource": {},
    ...     "attributes": {"gen_ai.operation.name": "chat", "gen_ai.response.id": "chatcmpl-1",
    ...         "gen_ai.response.model": "ck-7", "gen_ai.usage.output_tokens": 12,
    ...         "gen_ai.conversation.id": "s-1", "user.id": "u-1"}}
    >>> plan = plan_export([span, {**span, "attributes": {}}], "acme", "2026-06-01T00:00:00Z",
    ...                    "events", "dlq")
    >>> plan.accepted, plan.rejections, plan.ignored
    (1, [], ['not_genai'])
    >>> event = orjson.loads(plan.records[0].value)
    >>> event["event_id"]
    'otel:abababababababababababababababab:cdcdcdcdcdcdcdcd'
    >>> event["interaction_id"], event["payload"], event["ts"]
    ('chatcmpl-1', {'latency_ms': 250, 'output_tokens': 12}, '2026-05-28T20:26:40.250000Z')
    >>> span["attributes"]["gen_ai.response.id"] = "chatcmpl-0123456789abcdef.cnVuLTc"  # run-7
    >>> plan = plan_export([span], "acme", "2026-06-01T00:00:00Z", "events", "dlq")
    >>> orjson.loads(plan.records[0].value)["interaction_id"]
    'run-7'
    >>> del span["attributes"]["user.id"]
    >>> plan = plan_export([span], "acme", "2026-06-01T00:00:00Z", "events", "dlq")
    >>> plan.rejections, plan.error_message, plan.records[0].topic
    (['missing_field'], '1 refused: missing_field at user.id (1)', 'dlq')
    """
    accepted: list[OutRecord] = []
    dead: list[OutRecord] = []
    rejections: list[str] = []
    ignored: list[str] = []
    refused: Counter[str] = Counter()
    for item in items:
        try:
            mapped = to_event(item, tenant)
            if isinstance(mapped, str):
                ignored.append(mapped)
                continue
            event = validate_event(mapped, origin=Origin.client, tenant=tenant)
        except ContractError as err:
            err = _in_otlp_terms(err, item)
            rejections.append(str(err.reason))
            refused[f"{err.reason} at {err.field}" if err.field else str(err.reason)] += 1
            dead.append(
                OutRecord(
                    dlq_topic,
                    None,
                    orjson.dumps(
                        {
                            **err.to_dict(),
                            "raw": _clipped(item),
                            "received_at": received_at,
                            "org_id": tenant,
                        }
                    ),
                )
            )
            continue
        event["received_at"] = received_at
        accepted.append(
            OutRecord(events_topic, str(event["interaction_id"]).encode(), orjson.dumps(event))
        )
    message = ""
    if rejections:
        parts = ", ".join(f"{what} ({n})" for what, n in refused.most_common())
        message = f"{len(rejections)} refused: {parts}"
    return OtlpPlan(accepted + dead, len(accepted), rejections, ignored, message)


def to_event(item: Item, tenant: str) -> dict[str, Any] | str:
    """The events-v1 event an item stands for, or why it is none of rtrl's (a string).

    Raises ContractError for what the contract's own check cannot see (an unknown ``rtrl.*``
    name, an experiment that is not ``name:arm``, a missing time or id).
    """
    if item["signal"] == "span":
        return _span_event(item, tenant)
    return _log_event(item, tenant)


def _span_event(span: Item, tenant: str) -> dict[str, Any] | str:
    operation = _attribute(span, genai.OPERATION_NAME)
    if operation is None:
        return "not_genai"
    if operation not in genai.MODEL_CALL_OPERATIONS:
        return "not_a_model_call"
    start, end = span["start_time_unix_nano"], span["end_time_unix_nano"]
    event = _envelope(span, tenant, MODEL_CALL_TYPE, _time(end, "endTimeUnixNano"))
    if "event_id" not in event:
        trace_id = _id(span["trace_id"], 32, "traceId")
        event["event_id"] = f"otel:{trace_id}:{_id(span['span_id'], 16, 'spanId')}"
    payload: dict[str, Any] = {"latency_ms": round((end - start) / 1e6)}
    tokens = _attribute(span, genai.OUTPUT_TOKENS)
    if tokens is not None:
        payload["output_tokens"] = tokens
    event["payload"] = payload
    return event


def _log_event(record: Item, tenant: str) -> dict[str, Any] | str:
    name = record["event_name"] or _attribute(record, genai.EVENT_NAME_ATTRIBUTE)
    if not isinstance(name, str) or not name.startswith(genai.RTRL_EVENT_PREFIX):
        return "not_rtrl_event"
    kind = name[len(genai.RTRL_EVENT_PREFIX) :]
    shape = PAYLOADS.get(kind)
    if shape is None:
        detail = f"{name!r} names no events-v1 type (rtrl.<type>, e.g. rtrl.edit.accepted)"
        raise ContractError(Reason.unknown_type, "eventName", detail)
    when = record["time_unix_nano"] or record["observed_time_unix_nano"]
    event = _envelope(record, tenant, kind, _time(when, "timeUnixNano"))
    if "event_id" not in event:
        event["event_id"] = "otel:" + _digest(record)
    payload: dict[str, Any] = {}
    for field in shape.fields:
        value = _attribute(record, payload_attribute(field))
        if value is not None:
            payload[field] = value
    event["payload"] = payload
    return event


def _envelope(item: Item, tenant: str, kind: str, ts: str) -> dict[str, Any]:
    """The fields every event takes from the same attributes; absent ones stay absent, so the
    contract's check names them."""
    candidates = {
        "event_id": (genai.RTRL_EVENT_ID,),
        "interaction_id": (genai.RTRL_INTERACTION_ID, genai.RESPONSE_ID),  # see below
        "session_id": (genai.CONVERSATION_ID,),
        "user_id": (genai.USER_ID,),
        "checkpoint_id": (genai.RTRL_CHECKPOINT_ID, genai.RESPONSE_MODEL, genai.REQUEST_MODEL),
        "privacy_mode": (genai.RTRL_PRIVACY_MODE,),
    }
    event: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "type": kind, "ts": ts}
    for field, names in candidates.items():
        for name in names:
            value = _attribute(item, name)
            if value is not None:
                event[field] = value
                break
    interaction = event.get("interaction_id")
    if _attribute(item, genai.RTRL_INTERACTION_ID) is None and isinstance(interaction, str):
        event["interaction_id"] = interaction_of(interaction) or interaction
    event["org_id"] = tenant
    experiment = _attribute(item, genai.RTRL_EXPERIMENT)
    if experiment is not None:
        name, colon, arm = (
            experiment.partition(":") if isinstance(experiment, str) else ("", "", "")
        )
        if not colon:
            raise ContractError(
                Reason.out_of_range, genai.RTRL_EXPERIMENT, "the experiment as name:arm"
            )
        event["experiment"] = {"name": name, "arm": arm}
    return event


def _attribute(item: Item, name: str) -> Any:
    """The record's own attribute, else its resource's (None when neither has it)."""
    value = item["attributes"].get(name)
    return item["resource"].get(name) if value is None else value


def _time(unix_nano: int, field: str) -> str:
    if not unix_nano:
        raise ContractError(Reason.missing_field, field, "required (nanoseconds since 1970)")
    seconds, nanos = divmod(unix_nano, 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
    except (OverflowError, ValueError, OSError):
        raise ContractError(Reason.bad_timestamp, field, f"{unix_nano} is no time") from None
    return format_ts(moment)


def _id(hex_id: str, length: int, field: str) -> str:
    if not hex_id or hex_id.strip("0") == "":
        raise ContractError(Reason.missing_field, field, "required (a non-zero id)")
    if len(hex_id) != length or any(c not in "0123456789abcdef" for c in hex_id):
        raise ContractError(Reason.out_of_range, field, f"{length} hex digits")
    return hex_id


def _digest(record: Item) -> str:
    """The same for the same log record however it was encoded, and on every retry."""
    fields = ("event_name", "time_unix_nano", "observed_time_unix_nano", "trace_id", "span_id")
    canonical = orjson.dumps(
        [[record[f] for f in fields], record["attributes"], record["resource"]],
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.blake2b(canonical, digest_size=20).hexdigest()


def _in_otlp_terms(err: ContractError, item: Item) -> ContractError:
    """The contract's error with its field named as the OTLP record names it."""
    sources = _SPAN_SOURCES if item["signal"] == "span" else _LOG_SOURCES
    field = err.field
    if field is None:
        return err
    if field in sources:
        field = sources[field]
    elif field.startswith("payload."):
        field = payload_attribute(field.removeprefix("payload."))
    elif field.startswith("experiment."):
        field = genai.RTRL_EXPERIMENT
    else:
        return err
    return ContractError(err.reason, field, err.detail)


def _clipped(item: Item) -> Item:
    """The item as the dead-letter topic keeps it: long strings cut (an attribute may hold up to
    the body's limit, a Kafka message may not)."""

    def clip(values: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v[:200] + "..." if isinstance(v, str) and len(v) > 200 else v
            for k, v in values.items()
        }

    return {
        **clip(item),
        "attributes": clip(item["attributes"]),
        "resource": clip(item["resource"]),
    }
