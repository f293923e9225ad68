"""Evaluations as one OTLP ``ExportLogsServiceRequest`` (protobuf), and the endpoint's answer read.

Pure: no I/O. Each evaluation is a log record whose EventName is ``gen_ai.evaluation.result``
(also as the ``event.name`` attribute, which receivers older than the EventName field read),
with the GenAI evaluation attributes of the pinned semantic conventions and rtrl's own under
``rtrl.``. The record carries no trace or span id: no reward or rollout carries one
(``otel.evaluation``); ``gen_ai.response.id`` links it to the evaluated response.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber as Severity
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ingest.contract import genai
from otel.evaluation import Evaluation

SCOPE_NAME = "rtrl.otel"
CONTENT_TYPE = "application/x-protobuf"

# rtrl's attributes beside the conventions' (what a team filters or groups by).
INTERACTION_ID = "rtrl.interaction_id"
REVISION = "rtrl.reward.revision"
REWARD_VERSION = "rtrl.reward.version"
CHECKPOINT_ID = "rtrl.checkpoint_id"
TERM_PREFIX = "rtrl.reward."  # + r_edit, r_followup, ...

AttributeValue = str | int | float


def attributes_of(evaluation: Evaluation) -> dict[str, AttributeValue]:
    """The log record's attributes, in the order they are written; None values left out."""
    out: dict[str, AttributeValue] = {
        genai.EVENT_NAME_ATTRIBUTE: genai.EVALUATION_EVENT,
        genai.EVALUATION_NAME: evaluation.name,
    }
    if evaluation.score is not None:
        out[genai.EVALUATION_SCORE_VALUE] = float(evaluation.score)
    out[genai.EVALUATION_SCORE_LABEL] = evaluation.label
    out[genai.EVALUATION_EXPLANATION] = evaluation.explanation
    out[genai.RESPONSE_ID] = evaluation.response_id
    out[INTERACTION_ID] = evaluation.interaction_id
    out[REVISION] = evaluation.revision
    out[REWARD_VERSION] = evaluation.reward_version
    if evaluation.checkpoint_id is not None:
        out[CHECKPOINT_ID] = evaluation.checkpoint_id
    for term, value in evaluation.terms:
        out[TERM_PREFIX + term] = value
    return out


def log_record(evaluation: Evaluation, observed_unix_nano: int) -> LogRecord:
    return LogRecord(
        time_unix_nano=evaluation.time_unix_nano,
        observed_time_unix_nano=observed_unix_nano,
        severity_number=Severity.SEVERITY_NUMBER_INFO,
        severity_text="INFO",
        event_name=genai.EVALUATION_EVENT,
        attributes=[_key_value(k, v) for k, v in attributes_of(evaluation).items()],
    )


def export_request(
    evaluations: Sequence[Evaluation],
    *,
    service_name: str,
    scope_version: str,
    observed_unix_nano: int,
) -> ExportLogsServiceRequest:
    """One request holding every evaluation, under one resource and one scope."""
    scope_logs = ScopeLogs(
        scope=InstrumentationScope(name=SCOPE_NAME, version=scope_version),
        log_records=[log_record(e, observed_unix_nano) for e in evaluations],
        schema_url=genai.SCHEMA_URL,
    )
    resource = Resource(attributes=[_key_value("service.name", service_name)])
    return ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(resource=resource, scope_logs=[scope_logs], schema_url=genai.SCHEMA_URL)
        ]
    )


def rejected_by(body: bytes) -> tuple[int, str]:
    """(records the endpoint rejected, its message) from a 2xx answer's partial success; an
    empty body (allowed for full success) rejects none."""
    if not body:
        return 0, ""
    answer = ExportLogsServiceResponse.FromString(body)
    partial = answer.partial_success
    return int(partial.rejected_log_records), partial.error_message


def plain(value: AnyValue) -> AttributeValue | None:
    """An attribute's value as Python (what a receiver decodes; used by tests and tools)."""
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def _key_value(key: str, value: AttributeValue) -> KeyValue:
    if isinstance(value, bool):
        raise TypeError(f"{key}: no boolean attributes are written")
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))
