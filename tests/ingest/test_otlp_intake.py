"""The collector's OTLP intake on the real broker, with OpenTelemetry's own Python SDK and OTLP/HTTP
exporters as the client (protobuf), and OTLP/JSON requests by hand: what lands on
``telemetry.events`` and ``telemetry.dlq``, the answers, and the same safeguards as
``POST /v1/events`` (authentication, the contract's reason codes, the dead-letter topic, an answer
only after Kafka acknowledged, ids stable across retries)."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from infra.api_keys import KeyStore
from infra.topics import TopicNames
from ingest.contract import Origin, validate_event
from rewards.config import RewardConfig
from rewards.function import compute_record
from tests.support.collector import (
    ORG,
    CollectorHandle,
    CollectorProcess,
    drain_events,
    make_collector,
)
from tests.support.kafka import drain

PROMPT = "def secret_function(): the prompt text that must never reach Kafka"
USER = "u-5e1f"


def chat_attributes(response_id: str, **more: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "rtrl",
        "gen_ai.response.model": "ck-7",
        "gen_ai.response.id": response_id,
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 42,
        "gen_ai.conversation.id": "s-1",
        "gen_ai.input.messages": PROMPT,
        **more,
    }


@pytest.fixture
def spans_of() -> Iterator[Any]:
    """Spans made by the SDK's tracer (kept in memory, then exported by the test itself)."""
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "editor", "user.id": USER}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("rtrl.tests")

    def make(*specs: tuple[str, dict[str, Any]], pause_s: float = 0.0) -> list[Any]:
        kept.clear()
        for name, attributes in specs:
            with tracer.start_as_current_span(name, attributes=attributes):
                time.sleep(pause_s)
        return list(kept.get_finished_spans())

    yield make
    provider.shutdown()


def metric(collector: CollectorHandle, name: str, **labels: str) -> float:
    assert collector.running.metrics_url is not None
    text = httpx.get(collector.running.metrics_url).text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_sdk_spans_become_model_calls_and_the_rest_is_refused_or_ignored(
    collector: CollectorHandle, spans_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the exporter's documented way to send a header: OTEL_EXPORTER_OTLP_HEADERS, URL-encoded
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{collector.key}")
    spans = spans_of(
        ("chat ck-7", chat_attributes("chatcmpl-a", **{"rtrl.interaction.id": "i-gateway"})),
        ("chat ck-7", chat_attributes("chatcmpl-b", **{"rtrl.experiment": "fresh:treatment"})),
        ("chat ck-7", {**chat_attributes("chatcmpl-c"), "gen_ai.conversation.id": ""}),
        ("GET /files", {"http.request.method": "GET"}),
        ("execute_tool grep", {"gen_ai.operation.name": "execute_tool"}),
        pause_s=0.02,
    )
    exporter = OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces")
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()

    # each model call: interaction.completed, keyed by its interaction
    messages = drain(collector.config.bootstrap, collector.names.events, expected=2, timeout=20)
    events = {m.key(): orjson.loads(m.value()) for m in messages}
    # the gateway's interaction id when the span has it, else its response id
    assert set(events) == {b"i-gateway", b"chatcmpl-b"}
    first, second = events[b"i-gateway"], events[b"chatcmpl-b"]
    span = next(s for s in spans if s.attributes["gen_ai.response.id"] == "chatcmpl-a")
    assert first["event_id"] == f"otel:{span.context.trace_id:032x}:{span.context.span_id:016x}"
    assert first["type"] == "interaction.completed"
    assert (first["interaction_id"], first["session_id"], first["user_id"]) == (
        "i-gateway",
        "s-1",
        USER,  # from the resource: the record's own attributes do not have it
    )
    assert (first["org_id"], first["checkpoint_id"]) == (ORG, "ck-7")
    assert first["payload"]["output_tokens"] == 42
    duration_ms = (span.end_time - span.start_time) / 1e6
    assert abs(first["payload"]["latency_ms"] - duration_ms) <= 1 and duration_ms >= 20
    assert validate_event(first, origin=Origin.collected) == first
    assert second["experiment"] == {"name": "fresh", "arm": "treatment"}

    # the span without a session: the contract's reason, in the span's own terms, kept
    dead = drain_events(collector.config.bootstrap, collector.names.dlq, expected=1, timeout=20)
    assert [(d["reason"], d["field"]) for d in dead] == [("out_of_range", "gen_ai.conversation.id")]
    assert dead[0]["raw"]["attributes"]["gen_ai.response.id"] == "chatcmpl-c"
    assert dead[0]["org_id"] == ORG and dead[0]["received_at"]
    # attributes the mapping does not read never reach Kafka, not even the dead-letter topic
    for m in [*messages, *drain(collector.config.bootstrap, collector.names.dlq, expected=1)]:
        assert PROMPT.encode() not in m.value() and b"input_tokens" not in m.value()

    labels = {"signal": "traces"}
    assert metric(collector, "rtrl_collector_otlp_items_total", **labels, outcome="accepted") == 2
    assert metric(collector, "rtrl_collector_otlp_items_total", **labels, outcome="rejected") == 1
    assert metric(collector, "rtrl_collector_otlp_ignored_total", **labels, reason="not_genai") == 1
    ignored = metric(collector, "rtrl_collector_otlp_ignored_total", **labels,
                     reason="not_a_model_call")  # fmt: skip
    assert ignored == 1
    assert metric(collector, "rtrl_collector_otlp_rejections_total", **labels,
                  reason="out_of_range") == 1  # fmt: skip


def emit_outcomes(provider: LoggerProvider, extra: list[dict[str, Any]]) -> None:
    logger = provider.get_logger("rtrl.editor")
    on: dict[str, Any] = {
        "rtrl.interaction.id": "i-run",
        "gen_ai.conversation.id": "s-1",
        "user.id": USER,
        "rtrl.checkpoint.id": "ck-7",
    }
    outcomes: list[tuple[str, dict[str, Any]]] = [
        ("rtrl.agent.edit_proposed", {"rtrl.edit_id": "e-1", "rtrl.lines_added": 3,
                                      "rtrl.lines_removed": 1}),
        ("rtrl.edit.accepted", {"rtrl.edit_id": "e-1"}),
        ("rtrl.edit.retention", {"rtrl.edit_id": "e-1", "rtrl.retained_fraction": 0.5,
                                 "rtrl.after_s": 600}),
        ("rtrl.followup.sent", {"rtrl.dissatisfied": True}),
        ("rtrl.agent.tool_call", {"gen_ai.tool.name": "grep", "rtrl.valid": False}),
        ("rtrl.interaction.completed", {"rtrl.latency_ms": 5000, "rtrl.output_tokens": 9}),
    ]  # fmt: skip
    for name, attributes in outcomes:
        logger.emit(event_name=name, attributes={**on, **attributes}, body=PROMPT)
    for attributes in extra:
        logger.emit(event_name=attributes.pop("name", None), attributes={**on, **attributes})


def test_sdk_log_events_are_rtrl_outcomes_counted_once_across_retries(
    collector: CollectorHandle,
) -> None:
    kept = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource({"service.name": "editor"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(kept))
    emit_outcomes(
        provider,
        [
            {"name": "rtrl.edit.acepted", "rtrl.edit_id": "e-1"},  # no such type
            {
                "name": "rtrl.agent.edit_proposed",
                "rtrl.edit_id": "e-2",
                "rtrl.lines_added": "3",
                "rtrl.lines_removed": 0,
            },  # a count as a string  # fmt: skip
            {"note": "a plain log line"},  # no event name: not rtrl's
        ],
    )
    records = kept.get_finished_logs()
    provider.shutdown()
    exporter = OTLPLogExporter(
        endpoint=f"{collector.url}/v1/logs",
        headers={"Authorization": f"Bearer {collector.key}"},
        compression=Compression.Gzip,
    )
    assert exporter.export(records) == LogRecordExportResult.SUCCESS
    # the same export again, as an exporter retries one whose answer it lost
    assert exporter.export(records) == LogRecordExportResult.SUCCESS
    exporter.shutdown()

    bootstrap = collector.config.bootstrap
    events = drain_events(bootstrap, collector.names.events, expected=12, timeout=20)
    first, again = events[:6], events[6:]
    assert [e["event_id"] for e in again] == [e["event_id"] for e in first]
    assert len({e["event_id"] for e in first}) == 6
    assert [e["type"] for e in first] == [
        "agent.edit_proposed",
        "edit.accepted",
        "edit.retention",
        "followup.sent",
        "agent.tool_call",
        "interaction.completed",
    ]
    assert first[0]["payload"] == {"edit_id": "e-1", "lines_added": 3, "lines_removed": 1}
    assert first[4]["payload"] == {"tool": "grep", "valid": False}
    assert {e["interaction_id"] for e in events} == {"i-run"}
    assert all(PROMPT not in orjson.dumps(e).decode() for e in events)  # the log body stays out

    # the reward spec's function reads them as it reads events sent to POST /v1/events
    record = compute_record(events, RewardConfig())
    assert (record.n_duplicates, record.n_accepted, record.n_invalid_tool_calls) == (6, 1, 1)
    assert record.r_followup == -1.0 and record.r_edit == 1.5 and record.r_tool == -0.5

    dead = drain_events(bootstrap, collector.names.dlq, expected=4, timeout=20)
    assert sorted((d["reason"], d["field"]) for d in dead[:2]) == [
        ("unknown_type", "eventName"),
        ("wrong_type", "rtrl.lines_added"),
    ]
    ignored = metric(collector, "rtrl_collector_otlp_ignored_total", signal="logs",
                     reason="not_rtrl_event")  # fmt: skip
    assert ignored == 2


def json_spans(*spans: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": list(spans)}]}]
    }


def json_span(span_id: str, **attributes: Any) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}  # int64 as a string, as OTLP/JSON allows
        return {"stringValue": v}

    return {
        "traceId": "5B8EFFF798038103D269B633813FC60C",  # hex, upper case allowed
        "spanId": span_id,
        "name": "chat ck-7",
        "kind": 3,
        "startTimeUnixNano": "1780000000000000000",
        "endTimeUnixNano": "1780000000750000000",
        "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
        "status": {},
    }


def test_an_otlp_json_request_answers_partial_success_in_json(collector: CollectorHandle) -> None:
    good = {**chat_attributes("chatcmpl-j"), "user.id": USER}
    body = json_spans(
        json_span("EEE19B7EC3C1B174", **good),
        json_span("eee19b7ec3c1b175", **{**good, "user.id": "someone@example.com"}),
    )
    answer = httpx.post(
        f"{collector.url}/v1/traces",
        content=orjson.dumps(body),
        headers={"Authorization": f"Bearer {collector.key}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "partialSuccess": {
            "rejectedSpans": "1",
            "errorMessage": "1 refused: out_of_range at user.id (1)",
        }
    }
    [event] = drain_events(collector.config.bootstrap, collector.names.events, expected=1)
    assert event["event_id"] == "otel:5b8efff798038103d269b633813fc60c:eee19b7ec3c1b174"
    assert event["ts"] == "2026-05-28T20:26:40.750000Z"
    assert event["payload"] == {"latency_ms": 750, "output_tokens": 42}
    [dead] = drain_events(collector.config.bootstrap, collector.names.dlq, expected=1)
    assert (dead["reason"], dead["field"], dead["raw"]["span_id"]) == (
        "out_of_range",
        "user.id",
        "eee19b7ec3c1b175",
    )


def test_whole_requests_are_refused_in_their_own_encoding(
    collector: CollectorHandle, spans_of: Any
) -> None:
    url, key = collector.url, collector.key
    protobuf = {"Content-Type": "application/x-protobuf"}
    unknown = httpx.post(f"{url}/v1/traces", content=b"", headers={**protobuf,
                         "Authorization": "Bearer not-a-key"})  # fmt: skip
    assert unknown.status_code == 401 and unknown.headers["www-authenticate"] == "Bearer"
    status = Status.FromString(unknown.content)
    assert status.code == 16 and status.message.startswith("unauthorized: ")
    assert unknown.headers["x-request-id"] in status.message

    keyed = {"Authorization": f"Bearer {key}"}
    plain = httpx.post(f"{url}/v1/logs", content=b"{}", headers={**keyed,
                       "Content-Type": "text/plain"})  # fmt: skip
    assert (plain.status_code, plain.json()["reason"]) == (415, "unsupported_media_type")
    garbage = httpx.post(f"{url}/v1/traces", content=b"\xff\xff\xff", headers={**keyed, **protobuf})
    assert (
        garbage.status_code == 400 and "not_protobuf" in Status.FromString(garbage.content).message
    )
    bomb = gzip.compress(b"\0" * (collector.config.max_body_bytes + 1))
    inflated = httpx.post(f"{url}/v1/traces", content=bomb, headers={**keyed, **protobuf,
                          "Content-Encoding": "gzip"})  # fmt: skip
    assert inflated.status_code == 413
    not_otlp = httpx.post(f"{url}/v1/logs", json={"resourceLogs": 3}, headers=keyed)
    assert (not_otlp.status_code, not_otlp.json()["reason"]) == (400, "bad_batch")

    # the SDK's exporter reads a 401 as a failure and does not retry it
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": "Bearer x"})
    started = time.monotonic()
    spans = spans_of(("chat ck-7", {**chat_attributes("chatcmpl-x"), "user.id": USER}))
    assert exporter.export(spans) == SpanExportResult.FAILURE
    assert time.monotonic() - started < 5
    assert metric(collector, "rtrl_collector_otlp_requests_total", signal="traces",
                  status="401") == 2  # fmt: skip

    # a protobuf request answers OTLP's protobuf response
    empty = httpx.post(f"{url}/v1/traces", content=b"", headers={**keyed, **protobuf})
    assert empty.status_code == 200 and empty.headers["content-type"] == "application/x-protobuf"
    assert not ExportTraceServiceResponse.FromString(empty.content).HasField("partial_success")


def test_kafka_that_cannot_take_an_export_answers_503_with_retry_after(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> None:
    handle = make_collector(kafka_bootstrap, topic_names, tmp_path, producer_queue_max=2)
    try:
        good = {**chat_attributes("chatcmpl-q"), "user.id": USER}
        spans = [json_span(f"{i:016x}", **good) for i in range(1, 6)]
        headers = {"Authorization": f"Bearer {handle.key}"}
        answer = httpx.post(f"{handle.url}/v1/traces", json=json_spans(*spans), headers=headers)
        assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1
        assert answer.json()["reason"] == "unavailable"
        # as an exporter does after Retry-After: the queue drained, the smaller export goes in
        deadline = time.monotonic() + 10
        while True:
            accepted = httpx.post(
                f"{handle.url}/v1/traces", json=json_spans(*spans[:2]), headers=headers
            )
            if accepted.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert accepted.status_code == 200 and accepted.json() == {}
    finally:
        handle.running.stop()


def test_a_collector_killed_after_answering_an_export_has_lost_nothing(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path, spans_of: Any
) -> None:
    store = KeyStore(tmp_path / "k.db")
    key = store.create(ORG)
    store.close()
    process = CollectorProcess(kafka_bootstrap, topic_names, tmp_path / "k.db")
    try:
        attributes = {**chat_attributes("chatcmpl-k"), "user.id": USER}
        many = spans_of(*[("chat ck-7", attributes)] * 200)
        exporter = OTLPSpanExporter(
            endpoint=f"{process.url}/v1/traces", headers={"Authorization": f"Bearer {key}"}
        )
        assert exporter.export(many) == SpanExportResult.SUCCESS
    finally:
        process.kill()  # SIGKILL right after the answer: no flush, no goodbye
    written = drain_events(kafka_bootstrap, topic_names.events, expected=len(many), timeout=20)
    assert {e["event_id"] for e in written} == {
        f"otel:{s.context.trace_id:032x}:{s.context.span_id:016x}" for s in many
    }
