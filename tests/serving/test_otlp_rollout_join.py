"""A team's OpenTelemetry spans join the gateway's rollouts by response id alone: `rtrl serve` on
the tiny model answers the official openai client (one agent run of two chat calls, the second
recognised by the first's answer and streamed, and a completion under an interaction header);
each call's span, made by the OpenTelemetry SDK with the answer's ``id`` as
``gen_ai.response.id`` and no ``rtrl.interaction.id``, goes to a real collector's
``/v1/traces``; each event lands on ``telemetry.events`` under its rollout's interaction id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import orjson
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from checkpoints.store import CheckpointRegistry
from ingest.contract.response_ids import interaction_of
from models.rollout import Rollout
from tests.support.collector import CollectorHandle
from tests.support.gateway import Serve, api_key
from tests.support.kafka import drain

ASK: list[Any] = [{"role": "user", "content": "Write `mean(xs)` in Python."}]


def spans_for(calls: list[tuple[str, str, int]]) -> list[Any]:
    """One GenAI span per call (operation, response id, output tokens), as the OpenAI client's
    instrumentation records it: the answer's id and model, no rtrl attribute."""
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent", "user.id": "dev-1"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("agent")
    for operation, rid, tokens in calls:
        with tracer.start_as_current_span(f"{operation} t-0000") as span:
            span.set_attribute("gen_ai.operation.name", operation)
            span.set_attribute("gen_ai.provider.name", "openai")
            span.set_attribute("gen_ai.response.model", "t-0000")
            span.set_attribute("gen_ai.response.id", rid)
            span.set_attribute("gen_ai.usage.output_tokens", tokens)
            span.set_attribute("gen_ai.conversation.id", "s-1")
    spans = list(kept.get_finished_spans())
    provider.shutdown()
    return spans


def test_spans_with_only_the_response_id_land_in_the_rollouts_interaction(
    collector: CollectorHandle, registry: CheckpointRegistry, tmp_path: Path
) -> None:
    names, bootstrap = collector.names, collector.config.bootstrap
    key = api_key(tmp_path / "gateway-keys.sqlite")
    serve = Serve(["--registry", str(registry.root),
                   "--key-db", str(tmp_path / "gateway-keys.sqlite"),
                   "--bootstrap", bootstrap, "--topic-prefix", names.prefix, "--max-tokens", "8",
                   "--no-follow"], tmp_path / "serve.log")  # fmt: skip
    try:
        client = openai.OpenAI(base_url=f"{serve.url}/v1", api_key=key, max_retries=0,
                               default_headers={"X-Rtrl-User-Id": "dev-1"})  # fmt: skip
        first = client.chat.completions.with_raw_response.create(model="t-0000", messages=ASK)
        answer = first.parse()
        said = answer.choices[0].message.content
        history: list[Any] = [*ASK, {"role": "assistant", "content": said},
                              {"role": "user", "content": "Now test it."}]  # fmt: skip
        chunks = list(client.chat.completions.create(model="t-0000", messages=history,
                                                     stream=True))  # fmt: skip
        completion = client.completions.create(
            model="t-0000",
            prompt="def mean(xs):",
            extra_headers={"X-Rtrl-Interaction-Id": "ide-42"},
        )
    finally:
        serve.stop()
    run = first.headers["x-rtrl-interaction-id"]
    streamed = {c.id for c in chunks}
    assert len(streamed) == 1
    calls = [answer.id, streamed.pop(), completion.id]
    assert len(set(calls)) == 3
    # the ids carry the interaction, and the official client takes them as they are
    assert [interaction_of(rid) for rid in calls] == [run, run, "ide-42"]

    rollouts = [Rollout.from_json(m.value()) for m in drain(bootstrap, names.rollouts, 3)]
    # the chat calls' rollouts: one run, the second call joined to the first
    chat = {r.turn.call_id: r.interaction_id for r in rollouts if r.turn is not None}
    assert chat == {calls[0]: run, calls[1]: run}
    assert [r.interaction_id for r in rollouts if r.turn is None] == ["ide-42"]  # the completion

    spans = spans_for([("chat", calls[0], 8), ("chat", calls[1], 8),
                       ("text_completion", calls[2], 8)])  # fmt: skip
    exporter = OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces",
                                headers={"Authorization": f"Bearer {collector.key}"})  # fmt: skip
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()

    landed = drain(bootstrap, names.events, 3, timeout=20)
    events = [(m.key().decode(), orjson.loads(m.value())) for m in landed]
    assert [e["type"] for _, e in events] == ["interaction.completed"] * 3
    keys = {key: event["interaction_id"] for key, event in events}
    assert sorted(keys) == sorted([run, "ide-42"]) and all(k == v for k, v in keys.items())
    by_span = {e["event_id"].rsplit(":", 1)[1]: e["interaction_id"] for _, e in events}
    assert [by_span[f"{s.context.span_id:016x}"] for s in spans] == [run, run, "ide-42"]
    assert not drain(bootstrap, names.dlq, None, timeout=3, idle=1)
