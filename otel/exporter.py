"""`rtrl otel export`: read `rewards`, deliver each reward as an evaluation, then commit.

The order that makes a crash harmless, per batch:

1. read up to ``max_batch`` records (the platform's manual-commit consumer,
   ``infra.settings.manual_commit_consumer``: nothing is ever committed automatically);
2. map each to its evaluation (``otel.evaluation``); a record not exported is counted under its
   reason (privacy_mode, tombstone, malformed) and stays on the topic;
3. deliver the batch until the endpoint accepted it (``otel.delivery``: retries with backoff
   for as long as the endpoint is down; a refusal no retry mends stops the service);
4. only then commit the batch's offsets, synchronously.

A process killed anywhere before 4 leaves the batch uncommitted: the next exporter of the group
reads and delivers it again. Delivery is at least once: an endpoint can see an evaluation twice
(the log records are identical but for their observed time; Phoenix's annotation is upserted).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from infra.settings import manual_commit_consumer
from otel.delivery import Backoff, DeliveryStopped, Target, deliver
from otel.evaluation import (
    SKIP_MALFORMED,
    SKIP_TOMBSTONE,
    Evaluation,
    evaluate,
    skip_reason,
)
from otel.metrics import ExportMetrics
from otel.settings import ExportSettings
from rewards.record import RewardRecord

log = logging.getLogger(__name__)


def read_value(value: bytes | None) -> RewardRecord | str:
    """A `rewards` value as its record, or the reason it is none.

    >>> read_value(None), read_value(b"{}"), read_value(b"not json")
    ('tombstone', 'malformed', 'malformed')
    """
    if value is None:
        return SKIP_TOMBSTONE
    try:
        return RewardRecord.from_json_dict(orjson.loads(value))
    except (orjson.JSONDecodeError, ValueError, TypeError, KeyError):
        return SKIP_MALFORMED


@dataclass
class ExportStats:
    read: int = 0
    delivered: int = 0
    passed: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    batches: int = 0


def make_target(settings: ExportSettings) -> Any:
    if settings.target == "phoenix":
        from otel.phoenix import PhoenixTarget

        return PhoenixTarget(settings)
    from otel.otlp_target import OtlpLogsTarget

    return OtlpLogsTarget(settings)


class Exporter:
    def __init__(self, settings: ExportSettings, target: Target | None = None,
                 metrics: ExportMetrics | None = None) -> None:  # fmt: skip
        self.settings = settings
        self.target = target if target is not None else make_target(settings)
        self.metrics = metrics or ExportMetrics()
        self.backoff = Backoff(settings.retry_initial_s, settings.retry_max_s)
        self.stats = ExportStats()

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> ExportStats:
        s = self.settings
        server = self.metrics.serve(s.metrics_port) if s.metrics_port is not None else None
        consumer = Consumer(manual_commit_consumer(
            s.bootstrap, s.group_id, **{"session.timeout.ms": s.session_timeout_ms}
        ))  # fmt: skip
        assigned: list[int] = []  # --once counts idle time only once the group gave partitions
        consumer.subscribe([s.topics.rewards], on_assign=lambda _c, parts: assigned.append(1))
        log.info("exporting %s to %s (%s) as group %s", s.topics.rewards, s.endpoint, s.target,
                 s.group_id)  # fmt: skip
        idle_since = time.monotonic()
        try:
            while not should_stop():
                messages = consumer.consume(num_messages=s.max_batch, timeout=s.max_wait_s)
                if not messages:
                    if not assigned:
                        idle_since = time.monotonic()
                    elif s.once and time.monotonic() - idle_since >= s.once_idle_s:
                        break
                    continue
                idle_since = time.monotonic()
                if not self._export(consumer, messages, should_stop):
                    break
        finally:
            consumer.close()
            close = getattr(self.target, "close", None)
            if close is not None:
                close()
            if server is not None:
                server.shutdown()
        st = self.stats
        log.info("stopped: %d rewards read, %d delivered, passed %s, %d retries", st.read,
                 st.delivered, dict(st.passed) or "none", st.retries)  # fmt: skip
        return st

    def _export(self, consumer: Consumer, messages: list[Message],
                should_stop: Callable[[], bool]) -> bool:  # fmt: skip
        """One batch, delivered then committed; False when a stop interrupted its delivery."""
        started = time.monotonic()
        evaluations: list[Evaluation] = []
        passed: Counter[str] = Counter()
        ends: dict[tuple[str, int], int] = {}
        for m in messages:
            if m.error() is not None:
                raise KafkaException(m.error())
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            assert topic is not None and partition is not None and offset is not None
            ends[(topic, partition)] = offset + 1
            record = read_value(m.value())
            reason = record if isinstance(record, str) else skip_reason(record)
            if reason is not None:
                if reason == SKIP_MALFORMED:
                    log.warning("malformed reward at %s[%d]@%d passed (kept on the topic)",
                                topic, partition, offset)  # fmt: skip
                passed[reason] += 1
            else:
                assert isinstance(record, RewardRecord)
                evaluations.append(evaluate(record, self.settings.evaluation_name))
        try:
            done = deliver(self.target, evaluations, self.backoff,
                           wait_for_spans_s=self.settings.span_wait_s,
                           should_stop=should_stop)  # fmt: skip
        except DeliveryStopped as exc:
            log.info("%s; their offsets are not committed: the next exporter delivers them", exc)
            return False
        passed.update(done.rejected)
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(ends.items())]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # a rebalance took the partitions while we delivered
            log.warning("commit refused (%s): the new owner of these partitions delivers "
                        "their %d rewards again", exc, len(messages))  # fmt: skip
        self._count(len(messages), done.accepted, passed, done.retries, started)
        return True

    def _count(self, read: int, delivered: int, passed: Counter[str], retries: int,
               started: float) -> None:  # fmt: skip
        st, m = self.stats, self.metrics
        st.read += read
        st.delivered += delivered
        st.passed.update(passed)
        st.retries += retries
        st.batches += 1
        m.read.inc(read)
        m.delivered.inc(delivered)
        m.count_passed(passed)
        m.retries.inc(retries)
        m.batch_seconds.observe(time.monotonic() - started)
        log.debug("batch: %d read, %d delivered, passed %s", read, delivered, dict(passed))
