"""The exporter's Prometheus metrics: rewards read, evaluations delivered, passed by reason,
retries and batch time."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Histogram

from infra.metrics import ServiceMetrics


class ExportMetrics(ServiceMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.read = Counter("rtrl_otel_rewards_read", "records read from rewards", registry=r)
        self.delivered = Counter(
            "rtrl_otel_evaluations_delivered", "evaluations the endpoint accepted", registry=r
        )
        self.passed = Counter(
            "rtrl_otel_rewards_passed",
            "records not delivered, by reason (privacy_mode, tombstone, malformed, "
            "endpoint_rejected, span_not_found)",
            ["reason"],
            registry=r,
        )
        self.retries = Counter("rtrl_otel_retries", "attempts the endpoint refused", registry=r)
        self.batch_seconds = Histogram(
            "rtrl_otel_batch_seconds", "from a batch read to its offsets committed", registry=r
        )

    def count_passed(self, reasons: Mapping[str, int]) -> None:
        for reason, n in reasons.items():
            self.passed.labels(reason).inc(n)
