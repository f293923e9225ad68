"""The stream worker's Prometheus metrics (``--metrics-port``), in a registry of its own.

What an operator watches: input processed, records and corrections out, late and DLQ traffic by
reason, how far behind each partition is, how many interactions are open, and how long a chunk
takes from its first event to its input being acked.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from infra.metrics import ServiceMetrics


class WorkerMetrics(ServiceMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.events = Counter(
            "rtrl_stream_events", "input messages processed (valid or not)", registry=r
        )
        self.records = Counter(
            "rtrl_stream_records", "reward records published (all revisions)", registry=r
        )
        self.late = Counter(
            "rtrl_stream_late_events",
            "events sent to telemetry.late, by arrival",
            ["arrival"],
            registry=r,
        )
        self.events_by_type = Counter(
            "rtrl_stream_events_by_type",
            "valid events joined or sent late, by event type (the late share's denominator)",
            ["type"],
            registry=r,
        )
        self.late_by_type = Counter(
            "rtrl_stream_late_by_type",
            "events sent to telemetry.late, by event type: an outcome type whose share of "
            "rtrl_stream_events_by_type is high scored rewards without it (the log warns)",
            ["type"],
            registry=r,
        )
        self.dlq = Counter(
            "rtrl_stream_dlq", "messages sent to telemetry.dlq, by reason", ["reason"], registry=r
        )
        self.rescans = Counter(
            "rtrl_stream_deadline_rescans",
            "store rescans for deadlines beyond those kept in memory",
            registry=r,
        )
        self.open = Gauge(
            "rtrl_stream_open_interactions",
            "open interactions in this worker's partitions",
            registry=r,
        )
        self.lag = Gauge(
            "rtrl_stream_lag",
            "messages between this worker's position and the end of the partition",
            ["partition"],
            registry=r,
        )
        self.chunk_seconds = Histogram(
            "rtrl_stream_chunk_seconds",
            "a chunk's processing until its input is acked",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )

    def totals(self) -> dict[str, int]:
        """Running totals for the worker's progress line (every label summed)."""
        return {
            "events": _total(self.events),
            "records": _total(self.records),
            "late": _total(self.late),
            "dlq": _total(self.dlq),
            "chunks": _total(self.chunk_seconds, suffix="_count"),
        }


def _total(metric: MetricWrapperBase, suffix: str = "_total") -> int:
    return int(
        sum(
            sample.value
            for family in metric.collect()
            for sample in family.samples
            if sample.name.endswith(suffix)
        )
    )
