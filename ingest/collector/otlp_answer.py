"""The OTLP intake's answers, in the request's own encoding (OTLP/HTTP requires it).

A request that was read answers 200 with OTLP's export response: empty when every span or log
record was taken (ignored ones included), with ``partial_success`` (how many were refused and
why) when some were not. A request refused as a whole answers the collector's status and reason
code (``docs/contracts/events-v1.md``) as a ``google.rpc.Status``: in protobuf its ``code`` and
``message`` (the reason, the sentence and the request id); in JSON the same two fields beside the
collector's own error body, ``{reason, detail, request_id}``.
"""

from __future__ import annotations

import orjson
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.responses import Response

from ingest.collector.errors import error_body
from ingest.collector.otlp_decode import Encoding, Signal

MEDIA_TYPES = {Encoding.protobuf: "application/x-protobuf", Encoding.json: "application/json"}

GRPC_CODE_OF_STATUS = {400: 3, 401: 16, 403: 7, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}
"""The ``google.rpc.Code`` of an HTTP status (INVALID_ARGUMENT, UNAUTHENTICATED, ...)."""


def export_answer(signal: Signal, rejected: int, message: str, encoding: Encoding) -> Response:
    """OTLP's ExportTraceServiceResponse or ExportLogsServiceResponse.

    >>> export_answer(Signal.logs, 2, "2 refused", Encoding.json).body
    b'{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"2 refused"}}'
    >>> export_answer(Signal.traces, 0, "", Encoding.protobuf).body
    b''
    """
    if encoding is Encoding.json:
        body: dict[str, object] = {}
        if rejected:
            count = "rejectedSpans" if signal is Signal.traces else "rejectedLogRecords"
            body["partialSuccess"] = {count: str(rejected), "errorMessage": message}
        return Response(orjson.dumps(body), 200, media_type=MEDIA_TYPES[encoding])
    if signal is Signal.traces:
        traces = ExportTraceServiceResponse()
        if rejected:
            traces.partial_success.rejected_spans = rejected
            traces.partial_success.error_message = message
        raw = traces.SerializeToString()
    else:
        logs = ExportLogsServiceResponse()
        if rejected:
            logs.partial_success.rejected_log_records = rejected
            logs.partial_success.error_message = message
        raw = logs.SerializeToString()
    return Response(raw, 200, media_type=MEDIA_TYPES[encoding])


def refusal(
    status: int,
    reason: str,
    detail: str,
    rid: str,
    encoding: Encoding,
    headers: dict[str, str] | None = None,
) -> Response:
    """A whole request refused, as a ``google.rpc.Status`` in the request's encoding.

    >>> refusal(401, "unauthorized", "no key", "r-12345678", Encoding.protobuf).body
    b'\\x08\\x10\\x12)unauthorized: no key (request r-12345678)'
    """
    code = GRPC_CODE_OF_STATUS.get(status, 2)  # 2: UNKNOWN
    message = f"{reason}: {detail} (request {rid})"
    if encoding is Encoding.json:
        body = {"code": code, "message": message, **error_body(reason, detail, rid)}
        return Response(orjson.dumps(body), status, headers, media_type=MEDIA_TYPES[encoding])
    return Response(_status_bytes(code, message), status, headers, MEDIA_TYPES[encoding])


def _status_bytes(code: int, message: str) -> bytes:
    """``google.rpc.Status{code, message}`` in protobuf's wire format (two fields: the proto
    itself lives in a package the collector does not otherwise need)."""
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)
