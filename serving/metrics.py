"""The gateway's Prometheus metrics: requests, latency, and what became of each completion's
rollout (recorded, private, refused by reason, dropped by reason), the spool (in memory and on
disk), the checkpoint switches. Counters that other objects keep (the recorder's drops, the
backend's switches) are read at scrape time rather than copied."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from infra.metrics import ServiceMetrics
from serving.rollouts.spool import SpoolCounts


class _Read(Collector):
    """Metrics computed from live objects when scraped."""

    def __init__(self, read: Callable[[], Iterable[Metric]]) -> None:
        self._read = read

    def collect(self) -> Iterable[Metric]:
        return self._read()


class GatewayMetrics(ServiceMetrics):
    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.requests = Counter(
            "rtrl_gateway_requests",
            "requests answered, by endpoint and HTTP status",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram("rtrl_gateway_request_seconds", "time to answer a completion "
                                 "(to the last byte of a stream)", ["endpoint"], registry=r,
                                 buckets=(.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
                                          30))  # fmt: skip
        self.rollouts = Counter(
            "rtrl_gateway_rollouts",
            "completions by what became of their "
            "rollout: recorded (spooled for Kafka), private (privacy mode, "
            "never recorded), refused (see refused_by_reason), dropped "
            "(the spool was full: see rtrl_gateway_rollouts_dropped), failed (an error while "
            "building it, logged)",
            ["outcome"],
            registry=r,
        )
        self.requests_refused = Counter(
            "rtrl_gateway_requests_refused",
            "requests refused before the backend answered, by reason code (OpenAI's error code, "
            "else its type): foreign_checkpoint, model_not_found, invalid_api_key, ...",
            ["reason"],
            registry=r,
        )
        self.refused = Counter(
            "rtrl_gateway_rollouts_refused",
            "rollouts not recorded because the answer lacked what a rollout needs",
            ["reason"],
            registry=r,
        )
        self.calls = Counter(
            "rtrl_gateway_calls",
            "chat calls by how they joined an agent run: new (no earlier answer in the history), "
            "extends (spliced onto the answer it extends), new_segment (the same run, a history "
            "that does not extend the answer), unmatched (an answer this gateway does not "
            "remember: expired, another replica's, before a restart), ambiguous (more than one "
            "remembered answer fits: a new interaction)",
            ["outcome"],
            registry=r,
        )
        self.tool_calls = Counter(
            "rtrl_gateway_tool_calls",
            "answers to requests with tools, by how they were read: called (answered with "
            "tool_calls), text (no call written), or why the calls written were refused and "
            "the answer served as text (models.tool_format.BROKEN_REASONS)",
            ["outcome"],
            registry=r,
        )

    def refused_by_reason(self) -> dict[str, int]:
        """The rollouts refused since the start, by reason (what /readyz reports)."""
        return {
            sample.labels["reason"]: int(sample.value)
            for metric in self.refused.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        }

    def watch(self, spooled: Callable[[], int], dropped: Callable[[], Mapping[str, int]],
              delivered: Callable[[], int], switches: Callable[[], int],
              not_loaded: Callable[[], Mapping[str, int]],
              engine_restarts: Callable[[], int] = lambda: 0) -> None:  # fmt: skip
        def read() -> Iterable[Metric]:
            yield GaugeMetricFamily(
                "rtrl_gateway_spool_rollouts",
                "rollouts waiting for Kafka's acknowledgement",
                value=spooled(),
            )
            drops = CounterMetricFamily(
                "rtrl_gateway_rollouts_dropped", "rollouts lost, by reason", labels=["reason"]
            )
            for reason, n in dropped().items():
                drops.add_metric([reason], n)
            yield drops
            yield CounterMetricFamily(
                "rtrl_gateway_rollouts_delivered", "rollouts Kafka acknowledged", value=delivered()
            )
            yield CounterMetricFamily(
                "rtrl_gateway_checkpoint_switches",
                "times serving moved to a newly promoted checkpoint",
                value=switches(),
            )
            skipped = CounterMetricFamily(
                "rtrl_gateway_checkpoints_not_loaded",
                "promoted checkpoints the backend could not serve, by reason",
                labels=["reason"],
            )
            for reason, n in not_loaded().items():
                skipped.add_metric([reason], n)
            yield skipped
            yield CounterMetricFamily(
                "rtrl_gateway_engine_restarts",
                "llama-servers started again after their process died",
                value=engine_restarts(),
            )

        self.registry.register(_Read(read))

    def watch_spool(self, spooled_bytes: Callable[[], int], write_errors: Callable[[], int],
                    counts: Callable[[], SpoolCounts | None]) -> None:  # fmt: skip
        """The spool's bytes, and what its disk part did (when there is one)."""

        def read() -> Iterable[Metric]:
            yield GaugeMetricFamily(
                "rtrl_gateway_spool_bytes",
                "bytes of the rollouts waiting for Kafka's acknowledgement (bounded by "
                "--spool-max-bytes)",
                value=spooled_bytes(),
            )
            disk = counts()
            if disk is None:
                return
            yield GaugeMetricFamily(
                "rtrl_gateway_spool_disk_bytes",
                "bytes of the disk spool's segment files (those waiting for Kafka, and records "
                "acknowledged whose segment is not yet deleted)",
                value=disk.disk_bytes,
            )
            yield GaugeMetricFamily(
                "rtrl_gateway_spool_segments", "disk spool segment files", value=disk.segments
            )
            yield CounterMetricFamily(
                "rtrl_gateway_spool_written",
                "rollouts written to the disk spool before the producer had them",
                value=disk.written,
            )
            yield CounterMetricFamily(
                "rtrl_gateway_spool_recovered",
                "rollouts found in the disk spool at start, left by an earlier run",
                value=disk.recovered,
            )
            yield CounterMetricFamily(
                "rtrl_gateway_spool_write_errors",
                "rollouts the disk spool could not write (kept in memory only, logged)",
                value=write_errors(),
            )
            discarded = CounterMetricFamily(
                "rtrl_gateway_spool_discarded_bytes",
                "bytes found unreadable in the disk spool at start, by reason: torn_tail (a "
                "write cut short by a crash), bad_checksum, bad_magic (a file set aside)",
                labels=["reason"],
            )
            for reason, n in disk.discarded.items():
                discarded.add_metric([reason], n)
            yield discarded

        self.registry.register(_Read(read))
