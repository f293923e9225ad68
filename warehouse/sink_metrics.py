"""The sink's Prometheus metrics (``rtrl warehouse sink --metrics-port``), in their own registry.

What an operator watches: messages consumed and landed (written and committed) per dataset,
files written, how long a flush takes, and how far each partition's committed offset is behind
its end (the data not yet in the warehouse).
"""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from infra.metrics import ServiceMetrics


class SinkMetrics(ServiceMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.consumed = Counter(
            "rtrl_sink_consumed", "messages consumed, by dataset", ["dataset"], registry=r
        )
        self.landed = Counter(
            "rtrl_sink_landed",
            "messages written to Parquet and committed, by dataset",
            ["dataset"],
            registry=r,
        )
        self.files = Counter(
            "rtrl_sink_files", "Parquet files written, by dataset", ["dataset"], registry=r
        )
        self.flush_seconds = Histogram(
            "rtrl_sink_flush_seconds",
            "a flush: files written, fsynced, renamed, then committed",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.lag = Gauge(
            "rtrl_sink_lag",
            "messages between the committed offset and the end of the partition",
            ["topic", "partition"],
            registry=r,
        )

    def count_consumed(self, messages: list[Any], datasets: dict[str, str]) -> None:
        for topic, n in Tally(m.topic() for m in messages).items():
            self.consumed.labels(datasets[topic]).inc(n)
