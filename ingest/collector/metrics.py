"""The collector's Prometheus metrics (served by its app at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from infra.metrics import ServiceMetrics

__all__ = ["CONTENT_TYPE_LATEST", "CollectorMetrics"]


class CollectorMetrics(ServiceMetrics):
    def __init__(self) -> None:
        super().__init__()
        self.requests = Counter(
            "rtrl_collector_requests",
            "POST /v1/events by HTTP status",
            ["status"],
            registry=self.registry,
        )
        self.events = Counter(
            "rtrl_collector_events",
            "events by outcome (accepted, rejected)",
            ["outcome"],
            registry=self.registry,
        )
        self.rejections = Counter(
            "rtrl_collector_rejections",
            "rejected events by reason code",
            ["reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "rtrl_collector_request_seconds",
            "POST /v1/events latency, Kafka acks included",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.otlp_requests = Counter(
            "rtrl_collector_otlp_requests",
            "POST /v1/traces and /v1/logs by signal (traces, logs) and HTTP status",
            ["signal", "status"],
            registry=self.registry,
        )
        self.otlp_items = Counter(
            "rtrl_collector_otlp_items",
            "OTLP spans and log records by signal and outcome (accepted, rejected, ignored)",
            ["signal", "outcome"],
            registry=self.registry,
        )
        self.otlp_rejections = Counter(
            "rtrl_collector_otlp_rejections",
            "refused OTLP spans and log records by signal and reason code",
            ["signal", "reason"],
            registry=self.registry,
        )
        self.otlp_ignored = Counter(
            "rtrl_collector_otlp_ignored",
            "OTLP spans and log records that are no rtrl event, by signal and why",
            ["signal", "reason"],
            registry=self.registry,
        )
        self.kafka_reachable = Gauge(
            "rtrl_collector_kafka_reachable",
            "1 when the producer reaches Kafka",
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
