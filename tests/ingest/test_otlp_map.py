"""The OTLP intake's pure parts, without a broker: both encodings read into the same items (so the
same events and ids), and each mapping rule and refusal in the OTLP record's own terms."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue

from ingest.collector.otlp_decode import Encoding, OtlpRefused, Signal, decode
from ingest.collector.otlp_map import keep, plan_export

T0 = 1_780_000_000_000_000_000
ENVELOPE = {"rtrl.interaction.id": "i-1", "gen_ai.conversation.id": "s-1", "user.id": "u-1",
            "rtrl.checkpoint.id": "ck-7"}  # fmt: skip


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value)


def log_request(name: str, attributes: dict[str, Any]) -> tuple[bytes, bytes]:
    """One log record as OTLP protobuf and as OTLP/JSON."""
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.time_unix_nano, record.event_name = T0, name
    record.trace_id, record.span_id = bytes.fromhex("ab" * 16), bytes.fromhex("cd" * 8)
    record.body.string_value = "a prompt"
    record.attributes.extend(KeyValue(key=k, value=any_value(v)) for k, v in attributes.items())
    record.attributes.append(
        KeyValue(key="rtrl.lines", value=AnyValue(array_value=ArrayValue(values=[any_value(1)])))
    )

    def json_value(v: Any) -> dict[str, Any]:
        kind = {bool: "boolValue", int: "intValue", float: "doubleValue"}.get(type(v))
        return {kind: str(v) if kind == "intValue" else v} if kind else {"stringValue": v}

    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{
        "timeUnixNano": str(T0), "eventName": name, "traceId": "AB" * 16, "spanId": "cd" * 8,
        "body": {"stringValue": "a prompt"},
        "attributes": [{"key": k, "value": json_value(v)} for k, v in attributes.items()]
        + [{"key": "rtrl.lines", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}}],
    }]}]}]}  # fmt: skip
    return request.SerializeToString(), orjson.dumps(document)


def plan_of(items: list[dict[str, Any]]) -> Any:
    return plan_export(items, "acme", "2026-06-01T00:00:00.000000Z", "events", "dlq")


def test_protobuf_and_json_give_the_same_event_and_id() -> None:
    attributes = {**ENVELOPE, "rtrl.edit_id": "e-1", "rtrl.retained_fraction": 0.5,
                  "rtrl.after_s": 600, "gen_ai.input.messages": "a prompt"}  # fmt: skip
    protobuf, json = log_request("rtrl.edit.retention", attributes)
    from_protobuf = decode(Signal.logs, protobuf, Encoding.protobuf, 10, keep)
    from_json = decode(Signal.logs, json, Encoding.json, 10, keep)
    assert from_protobuf == from_json
    assert "gen_ai.input.messages" not in from_json[0]["attributes"]  # dropped at the door
    assert from_json[0]["attributes"]["rtrl.lines"] == {"arrayValue": "not kept"}
    [record] = plan_of(from_json).records
    event = orjson.loads(record.value)
    assert event["event_id"] == orjson.loads(plan_of(from_protobuf).records[0].value)["event_id"]
    assert event["event_id"].startswith("otel:") and len(event["event_id"]) == 45
    assert event["payload"] == {"edit_id": "e-1", "retained_fraction": 0.5, "after_s": 600}
    assert (event["type"], event["ts"], record.key) == (
        "edit.retention",
        "2026-05-28T20:26:40.000000Z",
        b"i-1",
    )
    # another record (another time) gets another id; the emitter's own id wins over both
    later = [{**from_json[0], "time_unix_nano": T0 + 1}]
    assert orjson.loads(plan_of(later).records[0].value)["event_id"] != event["event_id"]
    own = [{**from_json[0], "attributes": {**from_json[0]["attributes"], "rtrl.event.id": "ev-9"}}]
    assert orjson.loads(plan_of(own).records[0].value)["event_id"] == "ev-9"


def dead_letter(item: dict[str, Any]) -> tuple[str, str | None]:
    plan = plan_of([item])
    assert plan.accepted == 0 and plan.rejections, plan
    record = orjson.loads(plan.records[0].value)
    assert record["raw"]["signal"] == item["signal"] and record["org_id"] == "acme"
    return record["reason"], record["field"]


def log_item(name: str, **attributes: Any) -> dict[str, Any]:
    return {"signal": "log", "trace_id": "", "span_id": "", "event_name": name,
            "time_unix_nano": T0, "observed_time_unix_nano": 0,
            "attributes": {**ENVELOPE, **attributes}, "resource": {}}  # fmt: skip


def span_item(**attributes: Any) -> dict[str, Any]:
    return {"signal": "span", "trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "chat",
            "start_time_unix_nano": T0, "end_time_unix_nano": T0 + 10**9, "resource": {},
            "attributes": {**ENVELOPE, "gen_ai.operation.name": "chat",
                           "gen_ai.usage.output_tokens": 5, **attributes}}  # fmt: skip


@pytest.mark.parametrize(
    ("item", "refusal"),
    [
        (log_item("rtrl.edit.acepted", **{"rtrl.edit_id": "e"}), ("unknown_type", "eventName")),
        (log_item("rtrl.edit.accepted"), ("missing_field", "rtrl.edit_id")),
        (
            log_item("rtrl.followup.sent", **{"rtrl.dissatisfied": 1}),
            ("wrong_type", "rtrl.dissatisfied"),
        ),
        (
            log_item("rtrl.agent.tool_call", **{"rtrl.valid": True}),
            ("missing_field", "gen_ai.tool.name"),
        ),
        (
            {**log_item("rtrl.edit.accepted", **{"rtrl.edit_id": "e"}), "time_unix_nano": 0},
            ("missing_field", "timeUnixNano"),
        ),
        (
            log_item("rtrl.edit.accepted", **{"rtrl.edit_id": "e", "rtrl.experiment": "ab"}),
            ("out_of_range", "rtrl.experiment"),
        ),
        (span_item(**{"user.id": "a@b.c"}), ("out_of_range", "user.id")),
        (
            span_item(**{"rtrl.interaction.id": None}),
            ("missing_field", "rtrl.interaction.id or gen_ai.response.id"),
        ),
        (
            span_item(**{"gen_ai.usage.output_tokens": 5.0}),
            ("wrong_type", "gen_ai.usage.output_tokens"),
        ),
        (
            {**span_item(), "end_time_unix_nano": T0 - 10**6},
            ("out_of_range", "endTimeUnixNano - startTimeUnixNano"),
        ),
        ({**span_item(), "span_id": "00" * 8}, ("missing_field", "spanId")),
        ({**span_item(), "trace_id": "xyz"}, ("out_of_range", "traceId")),
    ],  # fmt: skip
)
def test_each_refusal_names_its_otlp_field(item: dict[str, Any], refusal: tuple[str, str]) -> None:
    if item["attributes"].get("rtrl.interaction.id", "") is None:
        del item["attributes"]["rtrl.interaction.id"]
    assert dead_letter(item) == refusal


def test_what_is_not_rtrls_is_ignored_and_large_strings_are_clipped() -> None:
    plan = plan_of([span_item(**{"gen_ai.operation.name": "embeddings"}),
                    {**span_item(), "attributes": {}}, log_item(""),
                    log_item("gen_ai.evaluation.result")])  # fmt: skip
    assert (plan.accepted, plan.rejections, plan.records) == (0, [], [])
    assert plan.ignored == ["not_a_model_call", "not_genai", "not_rtrl_event", "not_rtrl_event"]
    huge = span_item(**{"user.id": "u" * 100_000})
    raw = orjson.loads(plan_of([huge]).records[0].value)["raw"]
    assert len(raw["attributes"]["user.id"]) == 203


def test_too_many_records_refuse_the_request() -> None:
    protobuf, _ = log_request("rtrl.edit.accepted", {})
    with pytest.raises(OtlpRefused) as refused:
        decode(Signal.logs, protobuf * 3, Encoding.protobuf, 2, keep)  # 3 resources, 1 each
    assert (refused.value.status, refused.value.reason) == (413, "too_many_events")
