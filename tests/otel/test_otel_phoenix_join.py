"""A reward finds its span in Arize Phoenix when the span names its interaction without the
reward's id as ``gen_ai.response.id``: by ``rtrl.interaction.id``, or by a gateway's response id
that carries the interaction (``ingest.contract.response_ids``); a span whose response id is of
another form is never taken for it."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from infra.topics import TopicNames
from ingest.contract.response_ids import response_id
from otel.exporter import Exporter
from otel.settings import ExportSettings
from tests.support.kafka import produce_raw
from tests.support.otel import Phoenix, reward


def send_spans(phoenix: Phoenix, *attributes: dict[str, str]) -> list[str]:
    """GenAI chat spans with these attributes, as an instrumented agent sends them; their ids."""
    provider = TracerProvider(resource=Resource({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.otlp_traces)))
    ids = []
    for extra in attributes:
        with provider.get_tracer("test").start_as_current_span("chat t-0000") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            for name, value in extra.items():
                span.set_attribute(name, value)
            ids.append(format(span.get_span_context().span_id, "016x"))
    provider.shutdown()
    return ids


def annotated(phoenix: Phoenix, span_id: str, timeout_s: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        answer = httpx.get(f"{phoenix.url}/v1/projects/default/span_annotations",
                           params={"span_ids": [span_id]}, timeout=10)  # fmt: skip
        answer.raise_for_status()
        if answer.json()["data"] or time.monotonic() > deadline:
            return list(answer.json()["data"])
        time.sleep(0.25)


def test_a_reward_finds_the_span_by_interaction_attribute_or_gateway_response_id(
    phoenix: Phoenix, kafka_bootstrap: str, topic_names: TopicNames
) -> None:
    tag = uuid.uuid4().hex[:12]
    by_header, by_id, stranger = f"run-h-{tag}", f"run-g-{tag}", f"run-s-{tag}"
    header_span, id_span, other_span = send_spans(
        phoenix,
        {"gen_ai.response.id": f"chatcmpl-{uuid.uuid4().hex}", "rtrl.interaction.id": by_header},
        {"gen_ai.response.id": response_id(by_id, "chatcmpl")},
        # the stranger's interaction as the response id's text, not in the gateway's form
        {"gen_ai.response.id": f"chatcmpl-0123456789abcdef.{stranger}"},
    )
    opened = datetime.now(UTC) - timedelta(minutes=5)
    window = {"t_open": opened, "t_close": opened + timedelta(minutes=30)}
    produce_raw(kafka_bootstrap, topic_names.rewards, [
        (i.encode(), orjson.dumps(reward(i, **window).to_json_dict()), None)
        for i in (by_header, by_id, stranger)
    ])  # fmt: skip
    settings = ExportSettings(bootstrap=kafka_bootstrap, topics=topic_names, endpoint=phoenix.url,
                              target="phoenix", group_id="otel-phoenix-join", once=True,
                              once_idle_s=1.0, max_wait_s=0.2, span_wait_s=3.0,
                              retry_initial_s=0.1, retry_max_s=0.5)  # fmt: skip
    stats = Exporter(settings).run()
    assert (stats.delivered, stats.passed) == (2, {"span_not_found": 1})
    for span_id, interaction in ((header_span, by_header), (id_span, by_id)):
        (note,) = annotated(phoenix, span_id)
        assert note["metadata"]["interaction_id"] == interaction
        assert note["result"]["score"] == 0.65
    assert annotated(phoenix, other_span, timeout_s=0) == []
