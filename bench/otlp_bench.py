#!/usr/bin/env python3
"""OTLP spans and log events per second per core through the collector, beside POST /v1/events.

One run, one broker (started here unless ``--bootstrap``), one ``rtrl collector`` process (one
worker, rate limit lifted), rows in turn, each of ``--events`` items in requests of ``--batch``
from ``--concurrency`` keep-alive clients:

* ``POST /v1/events``: events-v1 events from ``rewards.workload`` (JSON), the peer;
* ``POST /v1/traces``, protobuf: GenAI chat spans made by OpenTelemetry's SDK and encoded by its
  OTLP exporter's own encoder (``encode_spans``), each with its ``gen_ai.*`` attributes and a
  prompt in ``gen_ai.input.messages`` (read past and dropped by the collector);
* ``POST /v1/traces``, OTLP/JSON: the same spans, hex ids and int64 as strings;
* ``POST /v1/logs``, protobuf: ``rtrl.*`` outcome events (proposed, accepted, retention,
  follow-up, tool call) made by the SDK's logger and encoded by ``encode_logs``.

An item counts once its request was answered 200 (every one was accepted: the run stops on a
refusal), so once Kafka acknowledged it. "events/s per core" is items over the collector
process's CPU seconds (user + system, librdkafka's threads included): the cost that decides
how many cores a load needs, steadier than wall-clock rates on a shared machine.
Figures go to stdout and to ``bench/out/otlp_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, kafka, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import orjson  # noqa: E402
from collector_throughput import (  # noqa: E402
    ORG,
    client_events,
    cpu_seconds,
    quantile,
    read_response,
    start_collector,
)
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from infra.api_keys import KeyStore  # noqa: E402
from infra.topics import TopicNames  # noqa: E402
from infra.topics_apply import apply_topics  # noqa: E402

RESOURCE = Resource({"service.name": "editor-bench", "user.id": "u-bench"})
PROMPT = "Write a Python function `add(a, b)` that returns the sum of a and b. " * 4


def chat_spans(n: int) -> list:
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("bench")
    for i in range(n):
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "rtrl",
            "gen_ai.response.model": "ck-bench",
            "gen_ai.response.id": f"chatcmpl-{i:032x}",
            "gen_ai.usage.input_tokens": 180,
            "gen_ai.usage.output_tokens": 64,
            "gen_ai.conversation.id": f"s-{i // 20}",
            "gen_ai.input.messages": PROMPT,
            "rtrl.interaction.id": f"i-{i // 4}",
        }
        with tracer.start_as_current_span("chat ck-bench", attributes=attributes):
            pass
    spans = list(kept.get_finished_spans())
    provider.shutdown()
    return spans


def outcome_logs(n: int) -> list:
    kept = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(kept))
    logger = provider.get_logger("bench")
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("rtrl.agent.edit_proposed", {"rtrl.lines_added": 12, "rtrl.lines_removed": 3}),
        ("rtrl.edit.accepted", {}),
        ("rtrl.edit.retention", {"rtrl.retained_fraction": 0.75, "rtrl.after_s": 600}),
        ("rtrl.followup.sent", {"rtrl.dissatisfied": False}),
        ("rtrl.agent.tool_call", {"gen_ai.tool.name": "grep", "rtrl.valid": True}),
    ]
    for i in range(n):
        name, payload = kinds[i % len(kinds)]
        attributes: dict[str, Any] = {
            "rtrl.interaction.id": f"i-{i // 5}",
            "gen_ai.conversation.id": "s-1",
            "rtrl.checkpoint.id": "ck-bench",
            "rtrl.edit_id": f"e-{i // 5}",
            **payload,
        }
        logger.emit(event_name=name, attributes=attributes)
    records = list(kept.get_finished_logs())
    provider.shutdown()
    return records


def otlp_json(spans: list) -> bytes:
    """OTLP/JSON of the SDK's spans, as another client would send them."""

    def value(v: object) -> dict:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": v}

    def attributes(pairs: dict) -> list:
        return [{"key": k, "value": value(v)} for k, v in pairs.items()]

    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": attributes(dict(RESOURCE.attributes))},
                    "scopeSpans": [
                        {
                            "scope": {"name": "bench"},
                            "spans": [
                                {
                                    "traceId": f"{s.context.trace_id:032x}",
                                    "spanId": f"{s.context.span_id:016x}",
                                    "name": s.name,
                                    "kind": 3,
                                    "startTimeUnixNano": str(s.start_time),
                                    "endTimeUnixNano": str(s.end_time),
                                    "attributes": attributes(dict(s.attributes)),
                                }
                                for s in spans
                            ],
                        }
                    ],
                }
            ]
        }
    )


async def post_all(
    url: str, path: str, media: str, key: str, bodies: list[bytes], concurrency: int
) -> tuple[float, list[float]]:
    """Every body over ``concurrency`` keep-alive connections (HTTP/1.1 by hand: the load
    generator costs little next to the collector); stops at the first answer that is not a
    whole acceptance."""
    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: {media}\r\nContent-Length: "
    )
    latencies: list[float] = []
    todo = iter(bodies)

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for body in todo:
                t0 = time.perf_counter()
                writer.write(f"{head}{len(body)}\r\n\r\n".encode() + body)
                status, answer = await read_response(reader)
                latencies.append(time.perf_counter() - t0)
                refused = path == "/v1/events" and orjson.loads(answer)["rejected"]
                if (
                    status != 200
                    or refused
                    or (media == "application/json" and b"partial" in answer)
                ):
                    raise RuntimeError(f"{path} {status}: {answer[:300]!r}")
                if media != "application/json" and answer:  # a partial success in protobuf
                    raise RuntimeError(f"{path}: {answer[:300]!r}")
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of a new one")
    parser.add_argument("--events", type=int, default=20_000, help="items per row")
    parser.add_argument("--batch", type=int, default=100, help="items per request")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent clients")
    args = parser.parse_args()
    n, batch = args.events, args.batch
    events = client_events(n)
    spans = chat_spans(n)
    logs = outcome_logs(n)
    chunks = range(0, n, batch)
    rows_in = [
        ("POST /v1/events, JSON", "/v1/events", "application/json",
         [orjson.dumps({"events": events[i : i + batch]}) for i in chunks]),
        ("POST /v1/traces, protobuf (GenAI chat spans)", "/v1/traces", "application/x-protobuf",
         [encode_spans(spans[i : i + batch]).SerializeToString() for i in chunks]),
        ("POST /v1/traces, OTLP/JSON (same spans)", "/v1/traces", "application/json",
         [otlp_json(spans[i : i + batch]) for i in chunks]),
        ("POST /v1/logs, protobuf (rtrl.* events)", "/v1/logs", "application/x-protobuf",
         [encode_logs(logs[i : i + batch]).SerializeToString() for i in chunks]),
    ]  # fmt: skip
    rows = []
    with kafka(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as tmp:
        names = TopicNames(prefix=f"bench{uuid.uuid4().hex[:8]}.")
        apply_topics(bootstrap, names, replication=1)
        store = KeyStore(Path(tmp) / "keys.sqlite")
        key = store.create(ORG)
        store.close()
        proc, url = start_collector(bootstrap, names.prefix, Path(tmp) / "keys.sqlite", 1)
        try:
            for _, route, media, bodies in rows_in:  # warm-up: connections, producer id, imports
                asyncio.run(post_all(url, route, media, key, bodies[:5], 2))
            for label, route, media, bodies in rows_in:
                cpu_before = cpu_seconds(proc)
                seconds, latencies = asyncio.run(
                    post_all(url, route, media, key, bodies, args.concurrency)
                )
                cpu = cpu_seconds(proc) - cpu_before
                rows.append(
                    {
                        "row": label,
                        "items": n,
                        "request_bytes_avg": sum(map(len, bodies)) / len(bodies),
                        "events_per_s": n / seconds,
                        "events_per_cpu_s": n / cpu,
                        "cpu_us_per_event": cpu * 1e6 / n,
                        "latency_p50_ms": 1000 * quantile(latencies, 0.50),
                        "latency_p99_ms": 1000 * quantile(latencies, 0.99),
                    }
                )
        finally:
            proc.terminate()
            proc.wait(30)
    peer = rows[0]["events_per_cpu_s"]
    for row in rows:
        row["per_core_ratio_to_events"] = row["events_per_cpu_s"] / peer
    print(
        format_table(
            ["row", "items", "events/s", "events/s per core", "ratio to /v1/events",
             "CPU µs/event", "p50 ms", "p99 ms"],
            [[r["row"], r["items"], int(r["events_per_s"]), int(r["events_per_cpu_s"]),
              r["per_core_ratio_to_events"], r["cpu_us_per_event"], r["latency_p50_ms"],
              r["latency_p99_ms"]] for r in rows],
        )
    )  # fmt: skip
    written = write_results(
        "otlp_bench",
        {
            "benchmark": "otlp_bench",
            "machine": machine(),
            "batch": batch,
            "concurrency": args.concurrency,
            "rows": rows,
        },
    )
    print(f"-> {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
