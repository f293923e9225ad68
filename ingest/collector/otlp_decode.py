"""OTLP/HTTP request bodies, protobuf or JSON, read into plain items for ``otlp_map``. No I/O.

Both encodings give the same items, so the mapping, the derived event ids and the dead-letter
records do not depend on how a client encoded its export:

    span: {"signal": "span", "trace_id": hex, "span_id": hex, "name": str,
           "start_time_unix_nano": int, "end_time_unix_nano": int,
           "attributes": {key: value}, "resource": {key: value}}
    log:  {"signal": "log", "trace_id": hex, "span_id": hex, "event_name": str,
           "time_unix_nano": int, "observed_time_unix_nano": int,
           "attributes": {key: value}, "resource": {key: value}}

Only the attributes ``keep`` names are read, of records and resources alike: whatever else an
instrumentation attaches (``gen_ai.input.messages``, a prompt, a completion, a log body) is
dropped here and never reaches Kafka, not even the dead-letter topic. A value is a ``str``,
``bool``, ``int`` or ``float``; an array, a key-value list or bytes become ``{"arrayValue": "not
kept"}`` and the like, which the contract refuses as the wrong type wherever one is read.

OTLP/JSON differs from protobuf's JSON mapping: trace and span ids are hex, not base64; 64-bit
integers may be strings or numbers; field names are lowerCamelCase; unknown fields are ignored.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

Item = dict[str, Any]
Keep = Callable[[str], bool]


class Encoding(enum.StrEnum):
    protobuf = "protobuf"
    json = "json"


class Signal(enum.StrEnum):
    traces = "traces"
    logs = "logs"


CONTENT_TYPES = {"application/x-protobuf": Encoding.protobuf, "application/json": Encoding.json}


class OtlpRefused(Exception):
    """A whole OTLP request refused: its HTTP status, a reason code and a sentence."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(f"{status} {reason}: {detail}")
        self.status = status
        self.reason = reason
        self.detail = detail


def encoding_of(content_type: str | None) -> Encoding | None:
    """The request's encoding from its ``Content-Type`` (None: neither of OTLP's two).

    >>> encoding_of("application/json; charset=utf-8"), encoding_of("text/plain")
    (<Encoding.json: 'json'>, None)
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return CONTENT_TYPES.get(media)


def inflate(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """The body without its ``Content-Encoding`` (gzip or none), at most ``max_bytes``.

    >>> import gzip
    >>> inflate(gzip.compress(b"x" * 10), "gzip", 10)
    b'xxxxxxxxxx'
    >>> inflate(gzip.compress(b"x" * 11), "gzip", 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ingest.collector.otlp_decode.OtlpRefused: 413 body_too_large: more than 10 bytes once ...
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding != "gzip":
        detail = f"Content-Encoding {encoding!r}; use gzip or none"
        raise OtlpRefused(415, "unsupported_encoding", detail)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise OtlpRefused(400, "bad_encoding", f"bad gzip data: {exc}") from None
    if len(out) > max_bytes:
        detail = f"more than {max_bytes} bytes once decompressed"
        raise OtlpRefused(413, "body_too_large", detail)
    if not inflater.eof:
        raise OtlpRefused(400, "bad_encoding", "truncated gzip data")
    return out


def decode(
    signal: Signal, body: bytes, encoding: Encoding, max_items: int, keep: Keep
) -> list[Item]:
    """Every span (``traces``) or log record (``logs``) of an export request, as items.

    >>> body = orjson.dumps({"resourceSpans": [{"resource": {"attributes": [
    ...     {"key": "user.id", "value": {"stringValue": "u-1"}}]}, "scopeSpans": [{"spans": [{
    ...     "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "eee19b7ec3c1b174",
    ...     "name": "chat m", "startTimeUnixNano": "1", "endTimeUnixNano": 2, "attributes": [
    ...     {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}},
    ...     {"key": "gen_ai.input.messages", "value": {"stringValue": "a prompt"}}]}]}]}]})
    >>> [item] = decode(Signal.traces, body, Encoding.json, 10, lambda k: "input" not in k)
    >>> item["trace_id"], item["end_time_unix_nano"], item["attributes"], item["resource"]
    ('5b8efff798038103d269b633813fc60c', 2, {'gen_ai.usage.output_tokens': 7}, {'user.id': 'u-1'})
    """
    if encoding is Encoding.protobuf:
        items = _from_protobuf(signal, body, keep)
    else:
        items = _from_json(signal, body, keep)
    if len(items) > max_items:
        noun = "spans" if signal is Signal.traces else "log records"
        detail = f"{len(items)} {noun}; at most {max_items} per request"
        raise OtlpRefused(413, "too_many_events", detail)
    return items


# -- protobuf -----------------------------------------------------------------------------------


def _from_protobuf(signal: Signal, body: bytes, keep: Keep) -> list[Item]:
    request = ExportTraceServiceRequest() if signal is Signal.traces else ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError) as exc:  # upb refuses nesting past its own limit
        raise OtlpRefused(400, "not_protobuf", f"not an OTLP {signal} request: {exc}") from None
    items: list[Item] = []
    if isinstance(request, ExportTraceServiceRequest):
        for resource_spans in request.resource_spans:
            resource = _pb_attributes(resource_spans.resource.attributes, keep)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    items.append(
                        {
                            "signal": "span",
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "name": span.name,
                            "start_time_unix_nano": span.start_time_unix_nano,
                            "end_time_unix_nano": span.end_time_unix_nano,
                            "attributes": _pb_attributes(span.attributes, keep),
                            "resource": resource,
                        }
                    )
        return items
    for resource_logs in request.resource_logs:
        resource = _pb_attributes(resource_logs.resource.attributes, keep)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                items.append(
                    {
                        "signal": "log",
                        "trace_id": record.trace_id.hex(),
                        "span_id": record.span_id.hex(),
                        "event_name": record.event_name,
                        "time_unix_nano": record.time_unix_nano,
                        "observed_time_unix_nano": record.observed_time_unix_nano,
                        "attributes": _pb_attributes(record.attributes, keep),
                        "resource": resource,
                    }
                )
    return items


def _pb_attributes(pairs: Any, keep: Keep) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        if keep(pair.key):
            kept[pair.key] = _pb_value(pair.value)
    return kept


def _pb_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(value, kind)
    if kind is None:
        return None
    return {_CAMEL[kind]: "not kept"}


_CAMEL = {"array_value": "arrayValue", "kvlist_value": "kvlistValue", "bytes_value": "bytesValue"}


# -- OTLP/JSON ----------------------------------------------------------------------------------


def _from_json(signal: Signal, body: bytes, keep: Keep) -> list[Item]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        reason = "too_deep" if "depth limit" in str(exc) else "not_json"
        raise OtlpRefused(400, reason, str(exc)[:200]) from None
    if not isinstance(document, dict):
        raise OtlpRefused(400, "bad_batch", f"an OTLP/JSON {signal} request is a JSON object")
    items: list[Item] = []
    if signal is Signal.traces:
        for resource_spans in _list(document, "resourceSpans"):
            resource = _json_attributes(_object(resource_spans, "resource"), keep)
            for scope in _list(resource_spans, "scopeSpans"):
                for span in _list(scope, "spans"):
                    items.append(
                        {
                            "signal": "span",
                            "trace_id": _hex(span, "traceId"),
                            "span_id": _hex(span, "spanId"),
                            "name": _text(span, "name"),
                            "start_time_unix_nano": _uint(span, "startTimeUnixNano"),
                            "end_time_unix_nano": _uint(span, "endTimeUnixNano"),
                            "attributes": _json_attributes(span, keep),
                            "resource": resource,
                        }
                    )
        return items
    for resource_logs in _list(document, "resourceLogs"):
        resource = _json_attributes(_object(resource_logs, "resource"), keep)
        for scope_logs in _list(resource_logs, "scopeLogs"):
            for record in _list(scope_logs, "logRecords"):
                items.append(
                    {
                        "signal": "log",
                        "trace_id": _hex(record, "traceId"),
                        "span_id": _hex(record, "spanId"),
                        "event_name": _text(record, "eventName"),
                        "time_unix_nano": _uint(record, "timeUnixNano"),
                        "observed_time_unix_nano": _uint(record, "observedTimeUnixNano"),
                        "attributes": _json_attributes(record, keep),
                        "resource": resource,
                    }
                )
    return items


def _bad(name: str, want: str) -> OtlpRefused:
    return OtlpRefused(400, "bad_batch", f"{name} must be {want}")


def _object(parent: Any, name: str) -> dict[str, Any]:
    value = parent.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(name, "an object")
    return value


def _list(parent: Any, name: str) -> list[Any]:
    if not isinstance(parent, dict):
        raise _bad(f"each of {name}'s parents", "an object")
    value = parent.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _bad(name, "an array of objects")
    return value


def _text(parent: dict[str, Any], name: str) -> str:
    value = parent.get(name, "")
    if not isinstance(value, str):
        raise _bad(name, "a string")
    return value


def _hex(parent: dict[str, Any], name: str) -> str:
    """A trace or span id: hex in OTLP/JSON (lower-cased here, as protobuf's bytes give it)."""
    return _text(parent, name).lower()


def _uint(parent: dict[str, Any], name: str) -> int:
    """A fixed64 time: a decimal string or a JSON integer."""
    value = parent.get(name, 0)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if type(value) is not int or not 0 <= value < 2**64:
        raise _bad(name, "an unsigned 64-bit integer (a string or a number)")
    return value


def _json_attributes(parent: dict[str, Any], keep: Keep) -> dict[str, Any]:
    pairs = parent.get("attributes")
    if pairs is None:
        return {}
    if not isinstance(pairs, list):
        raise _bad("attributes", "an array of {key, value}")
    kept: dict[str, Any] = {}
    for pair in pairs:
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise _bad("attributes", "an array of {key, value}")
        if keep(pair["key"]):
            kept[pair["key"]] = _json_value(pair.get("value"))
    return kept


def _json_value(value: Any) -> Any:
    """An AnyValue of OTLP/JSON; ``intValue`` as a string (int64) or a number. A value whose JSON
    type is not its kind's is not kept either (it could be nested arbitrarily deep)."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" and isinstance(inner, str):
        return inner
    if kind == "boolValue" and isinstance(inner, bool):
        return inner
    if kind == "intValue" and isinstance(inner, str) and inner.lstrip("-").isdigit():
        return int(inner)
    if kind == "intValue" and type(inner) is int:
        return inner
    if kind == "doubleValue" and type(inner) in (int, float):
        return float(inner)
    return {str(kind)[:40]: "not kept"}
