"""A reward shown in Arize Phoenix beside the span the team sent: the span goes in over OTLP with
the OpenTelemetry SDK, the reward through `rewards` on the real broker, and the evaluation is
read back from Phoenix's REST API on that span."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import orjson
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from infra.topics import TopicNames
from otel.exporter import Exporter
from otel.settings import ExportSettings
from tests.support.kafka import produce_raw
from tests.support.otel import Phoenix, reward


def send_chat_span(phoenix: Phoenix, response_id: str) -> str:
    """One GenAI chat span, as an instrumented app sends it; its span id in hex."""
    provider = TracerProvider(resource=Resource({"service.name": "editor-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.otlp_traces)))
    with provider.get_tracer("test").start_as_current_span("chat smollm2") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.provider.name", "openai")
        span.set_attribute("gen_ai.request.model", "smollm2-135m")
        span.set_attribute("gen_ai.response.id", response_id)
        span_id = format(span.get_span_context().span_id, "016x")
    provider.shutdown()
    return span_id


def annotations_of(phoenix: Phoenix, span_id: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{phoenix.url}/v1/projects/default/span_annotations",
                       params={"span_ids": [span_id]}, timeout=10)  # fmt: skip
    answer.raise_for_status()
    return list(answer.json()["data"])


def export_once(bootstrap: str, names: TopicNames, phoenix: Phoenix) -> Any:
    s = ExportSettings(bootstrap=bootstrap, topics=names, endpoint=phoenix.url, target="phoenix",
                       group_id="otel-phoenix", once=True, once_idle_s=1.0, max_wait_s=0.2,
                       span_wait_s=1.0, retry_initial_s=0.1, retry_max_s=0.5)  # fmt: skip
    return Exporter(s).run()


def test_phoenix_takes_no_otlp_logs(phoenix: Phoenix) -> None:
    """Why the Phoenix target exists: its OTLP receiver is traces only."""
    answer = httpx.post(phoenix.url + "/v1/logs", content=b"",
                        headers={"content-type": "application/x-protobuf"})  # fmt: skip
    assert answer.status_code in (404, 405)


def test_the_reward_appears_on_the_span_of_its_response_and_a_revision_replaces_it(
    phoenix: Phoenix, kafka_bootstrap: str, topic_names: TopicNames
) -> None:
    response_id = f"chatcmpl-{uuid.uuid4().hex}"
    span_id = send_chat_span(phoenix, response_id)
    produce_raw(kafka_bootstrap, topic_names.rewards, [
        (response_id.encode(), orjson.dumps(reward(response_id).to_json_dict()), None),
        (b"chatcmpl-nospan", orjson.dumps(reward("chatcmpl-nospan").to_json_dict()), None),
    ])  # fmt: skip
    stats = export_once(kafka_bootstrap, topic_names, phoenix)
    assert (stats.delivered, stats.passed) == (1, {"span_not_found": 1})

    deadline = time.monotonic() + 20
    while not (found := annotations_of(phoenix, span_id)):
        assert time.monotonic() < deadline, "no annotation on the span after 20 s"
        time.sleep(0.25)
    (note,) = found
    assert (note["name"], note["annotator_kind"], note["span_id"]) == ("rtrl.reward", "CODE",
                                                                      span_id)  # fmt: skip
    assert note["result"]["score"] == 0.65 and note["result"]["label"] == "positive"
    assert note["result"]["explanation"].startswith("reward 0.65 = r_edit 0.75 + r_followup 0")
    assert note["metadata"]["gen_ai.response.id"] == response_id

    corrected = reward(response_id, revision=1, reward=-0.35, r_edit=-0.25)
    produce_raw(kafka_bootstrap, topic_names.rewards,
                [(response_id.encode(), orjson.dumps(corrected.to_json_dict()), None)])  # fmt: skip
    export_once(kafka_bootstrap, topic_names, phoenix)
    (note,) = annotations_of(phoenix, span_id)
    assert (note["result"]["score"], note["result"]["label"]) == (-0.35, "negative")
    assert note["metadata"]["revision"] == 1
