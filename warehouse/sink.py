"""`rtrl warehouse sink`: Kafka topics -> Parquet files in the warehouse root.

The order of work is what makes the sink safe, so it is stated here once:

1. consume messages of ``rewards``, ``telemetry.events``, ``rollouts``, ``telemetry.late``,
   ``telemetry.dlq`` and ``checkpoints`` into a buffer (offsets are never auto-committed);
2. when the buffer holds ``max_rows`` messages or the oldest is ``max_seconds`` old, write one
   file per (dataset, Kafka partition, offset range, hive partition), each made durable
   (temporary name, fsync, rename) by :class:`warehouse.store.Store`;
3. only then commit, synchronously, the offset after the last message of each file.

Steps 2 and 3 run on one background thread (:mod:`warehouse.writer`), one flush after another,
while the next messages are consumed; a revocation or shutdown waits for them to finish.

A crash before step 3 leaves files whose offsets are not committed. On (re)assignment the sink
removes the files of a partition that start at or after its committed offset, then consumes from
that offset and writes them again; a rerun of the same range produces the same file name and
replaces it. So every committed message is in exactly one file, and every message is in at most
one file once the sink has restarted. The ``rewards`` mart then keeps one row per interaction
(latest revision, duplicates of an (interaction_id, revision) pair collapse): a record the
sink consumed is in the mart exactly once. Every dataset takes this one path; the marts on the
others (``checkpoints``, ``dlq_reasons``) count a message by its place in Kafka. Readers that
look at the files between a crash and the restart can see rows of uncommitted files; the marts'
dedup makes that harmless.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from infra.kafka_errors import KafkaRefused, is_refusal, refusal_sentence
from infra.settings import admin, manual_commit_consumer, process_security
from warehouse.compact import compact
from warehouse.encode import WITH_METADATA, Batch, encode
from warehouse.layout import join, part_name, superseded, uncommitted
from warehouse.privacy import load_forgotten
from warehouse.settings import SinkConfig
from warehouse.sink_metrics import SinkMetrics
from warehouse.store import Store
from warehouse.writer import BackgroundWriter

log = logging.getLogger(__name__)


@dataclass
class SinkStats:
    messages: int = 0
    files: int = 0
    flushes: int = 0
    first_message_at: float | None = None  # time.monotonic() of the first message consumed
    done_at: float | None = None  # ... and of the end of the last flush

    def rate(self) -> float:
        """Messages per second from the first message to the last flush (group join excluded)."""
        if self.first_message_at is None or self.done_at is None:
            return 0.0
        return self.messages / max(self.done_at - self.first_message_at, 1e-9)


class Sink:
    def __init__(self, config: SinkConfig, store: Store | None = None) -> None:
        self.config = config
        self.store = store or Store(config.root)
        self.datasets = config.datasets()
        self.stats = SinkStats()
        self.metrics = SinkMetrics()
        self._pending: list = []  # consumed, not yet written (confluent_kafka.Message)
        self._oldest: float | None = None
        self._committed: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset
        self._assigned: set[tuple[str, int]] = set()
        self._last_compaction = time.monotonic()
        self._consumer: Consumer | None = None
        self._writer: BackgroundWriter | None = None  # lives while run() does
        # (offsets, messages per partition, start) of files written, to commit on this thread:
        # the writer appends, the polling thread takes from the left (deque: thread-safe ends)
        self._written: deque[tuple[list[TopicPartition], dict, float]] = deque()
        self._commit_retry_at = 0.0
        self._admin: AdminClient | None = None
        self._last_end_check = 0.0

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> SinkStats:
        overrides: dict[str, object] = {"session.timeout.ms": self.config.session_timeout_ms}
        if self.config.instance_id:
            overrides["group.instance.id"] = self.config.instance_id
        consumer = Consumer(
            manual_commit_consumer(self.config.bootstrap, self.config.group_id, **overrides)
        )
        self._consumer = consumer
        self._writer = BackgroundWriter(depth=1)
        consumer.subscribe(list(self.datasets), on_assign=self._on_assign,
                           on_revoke=self._on_revoke)  # fmt: skip
        server = None
        last_message = time.monotonic()
        try:
            if self.config.metrics_port is not None:
                server = self.metrics.serve(self.config.metrics_port)
            while not should_stop():
                batch = consumer.consume(min(5000, self.config.max_rows), timeout=0.5)
                if batch:
                    self._add(batch)
                    last_message = time.monotonic()
                if self._due():
                    self.flush()
                self._commit_written()
                if (self.config.once and not batch and self._assigned
                        and self._drained(last_message)):  # fmt: skip
                    break
            self.flush(wait=True)
            self.stats.done_at = time.monotonic()
        finally:
            self._writer.close()
            self._writer = None
            consumer.close()
            self._consumer = None
            if server is not None:
                server.shutdown()
        return self.stats

    def _add(self, batch: list) -> None:  # confluent_kafka.Message objects, kept as they are
        if any(m.error() is not None for m in batch):
            for m in batch:
                if m.error() is not None:
                    self._refused(m)
                    log.warning("consume error: %s", m.error())
            batch = [m for m in batch if m.error() is None]
        self._pending.extend(batch)
        self.stats.messages += len(batch)
        self.metrics.count_consumed(batch, self.datasets)
        if self._oldest is None:
            self._oldest = time.monotonic()
            if self.stats.first_message_at is None:
                self.stats.first_message_at = self._oldest

    def _refused(self, message: Any) -> None:
        """Raise KafkaRefused when Kafka refuses this sink's identity (ACLs, credentials): no
        retry can cure that, and the operator needs to hear who was refused what."""
        code = message.error().code()
        if not is_refusal(code):
            return
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            what = self.config.group_id
        else:
            what = message.topic() or ", ".join(self.datasets)
        raise KafkaRefused(refusal_sentence(code, process_security(), "read", what))

    def _due(self) -> bool:
        if len(self._pending) >= self.config.max_rows:
            return True
        waited = 0.0 if self._oldest is None else time.monotonic() - self._oldest
        return self._oldest is not None and waited >= self.config.max_seconds

    def flush(self, wait: bool = False) -> None:
        """Hand the buffered messages to the writer thread, which writes their files; their
        offsets are committed here, on the polling thread, once the files are durable."""
        if self._writer is None:
            return
        if self._pending:
            pending, self._pending, self._oldest = self._pending, [], None
            self._writer.submit(lambda: self._write(_by_partition(pending)))
        if wait:
            self._writer.drain()
        self._commit_written(strict=wait)

    def _write(self, groups: dict[tuple[str, int], list]) -> None:
        """The writer thread's job: the files of ``groups``, then their offsets handed to the
        polling thread. It never calls the consumer: a commit from this thread, while the
        polling thread waited in a revoke callback for this job, hung the sink after a broker
        restart (the commit waited for a coordinator the group could not rejoin meanwhile)."""
        started = time.monotonic()
        forgotten = load_forgotten(self.store)
        offsets = []
        for (topic, partition), messages in groups.items():
            dataset = self.datasets[topic]
            batch = Batch([m.offset() for m in messages], [m.value() for m in messages])
            if dataset in WITH_METADATA:
                batch = Batch(batch.offsets, batch.values, [m.key() for m in messages],
                              [m.timestamp()[1] for m in messages],
                              [m.headers() for m in messages])  # fmt: skip
            name = part_name(partition, batch.offsets[0], batch.offsets[-1])
            for folder, frame in encode(dataset, partition, batch, forgotten).items():
                self.store.write_parquet(join(folder, name), frame)
                self.stats.files += 1
                self.metrics.files.labels(dataset).inc()
            offsets.append(TopicPartition(topic, partition, batch.offsets[-1] + 1))
        counts = {key: len(messages) for key, messages in groups.items()}
        self._written.append((offsets, counts, started))

    def _commit_written(self, strict: bool = False) -> None:
        """Commit the offsets of every file the writer has made durable (only now may Kafka
        forget those messages for this group), on the polling thread, in the writer's order.
        A commit Kafka cannot take now (no coordinator: the broker is away or restarting) is
        tried again a second later, the files staying durable meanwhile; any other failure
        raises (the sink restarts from its committed offsets). ``strict``: raise that one too
        (a revoke or the stop, where nothing may stay in flight)."""
        assert self._consumer is not None
        if not strict and time.monotonic() < self._commit_retry_at:
            return
        while self._written:
            offsets, counts, started = self._written[0]
            try:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                if strict or not _passing(exc):
                    raise
                log.warning("commit not taken now (%s): tried again in 1 s", exc.args[0])
                self._commit_retry_at = time.monotonic() + 1.0
                return
            self._written.popleft()
            for tp in offsets:
                self._committed[(tp.topic, tp.partition)] = tp.offset
                self.metrics.landed.labels(self.datasets[tp.topic]).inc(
                    counts[(tp.topic, tp.partition)]
                )
                _, high = self._consumer.get_watermark_offsets(tp, cached=True)
                if high >= 0:
                    self.metrics.lag.labels(tp.topic, str(tp.partition)).set(
                        max(0, high - tp.offset)
                    )
            self.metrics.flush_seconds.observe(time.monotonic() - started)
            self.stats.flushes += 1
            log.debug("flushed %d partitions", len(offsets))
            self._maybe_compact()

    def _maybe_compact(self) -> None:
        every = self.config.compact_every_s
        if every <= 0 or time.monotonic() - self._last_compaction < every:
            return
        self._last_compaction = time.monotonic()
        safe = {(self.datasets[t], p): off for (t, p), off in self._committed.items()}
        compact(self.store, safe)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        committed = consumer.committed(partitions, timeout=30)
        fresh = [tp for tp in committed if tp.offset == OFFSET_INVALID or tp.offset < 0]
        earliest = self._end_offsets(fresh, OffsetSpec.earliest()) if fresh else {}
        for tp in committed:
            key = (tp.topic, tp.partition)
            start = earliest[key] if key in earliest else tp.offset
            self._committed[key] = start
            self._assigned.add(key)
            self._discard_uncommitted(self.datasets[tp.topic], tp.partition, start)
        log.info("assigned %d partitions", len(partitions))

    def _end_offsets(self, partitions: list[TopicPartition], spec: OffsetSpec) -> dict:
        """One request for the offsets of many partitions (read_committed: the stable end),
        asked again for up to 30 s while Kafka answers with a passing error (a broker just
        restarted: its leaders' epochs move)."""
        deadline = time.monotonic() + 30
        while True:
            if self._admin is None:
                self._admin = AdminClient(admin(self.config.bootstrap))
            futures = self._admin.list_offsets(
                {TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=30,
            )
            try:
                return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
            except KafkaException as exc:
                if not _passing(exc) or time.monotonic() > deadline:
                    raise
                log.warning("offsets not given now (%s): asked again in 1 s", exc.args[0])
                self._admin = None  # a fresh client: this one's leader epochs are stale
                time.sleep(1)

    def _discard_uncommitted(self, dataset: str, partition: int, committed: int) -> None:
        parts = self.store.parts(dataset)
        by_part = {part: relative for relative, part in parts}
        stale = uncommitted(by_part, dataset, partition, committed)
        stale += [p for p in superseded(by_part) if p.partition == partition]
        for part in stale:
            log.info("removing %s (not committed or superseded)", by_part[part])
            self.store.remove(by_part[part])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            self.flush(wait=True)  # nothing of these partitions may be in flight after this
        except KafkaException as exc:  # the group moved on; the files are rewritten on restart
            log.warning("commit on revoke failed: %s", exc)
            self._drop_written()
        for tp in partitions:
            self._assigned.discard((tp.topic, tp.partition))

    def _drop_written(self) -> None:
        """Forget what the writer made durable but could not be committed: those files are
        not committed, so the next assignment removes them and reads their messages again."""
        self._written.clear()

    def _drained(self, last_message: float) -> bool:
        if self._caught_up():
            log.info("--once: every partition read to its end")
            return True
        if time.monotonic() - last_message > self.config.once_idle_s:
            log.info("--once: nothing new for %.0f s", self.config.once_idle_s)
            return True
        return False

    def _caught_up(self) -> bool:
        """Every assigned partition has been read up to its last stable offset."""
        assert self._consumer is not None
        now = time.monotonic()
        if now - self._last_end_check < 1.0:
            return False
        self._last_end_check = now
        assigned = [TopicPartition(t, p) for t, p in sorted(self._assigned)]
        ends = self._end_offsets(assigned, OffsetSpec.latest())
        positions = {(tp.topic, tp.partition): tp.offset
                     for tp in self._consumer.position(assigned)}  # fmt: skip
        buffered = {key: ms[-1].offset() + 1 for key, ms in _by_partition(self._pending).items()}
        for key, end in ends.items():
            seen = max(buffered.get(key, 0),
                       self._committed.get(key, 0), positions.get(key, 0))  # fmt: skip
            if seen < end:
                return False
        return True


_PASSING = frozenset({
    KafkaError._WAIT_COORD, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
})  # fmt: skip


def _passing(exc: KafkaException) -> bool:
    """Whether Kafka refused for a reason that passes (a coordinator or a leader away or
    moving, as after a broker's restart)."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and (error.retriable() or error.code() in _PASSING)


def _by_partition(messages: list) -> dict[tuple[str, int], list]:
    """Messages grouped by (topic, partition), each group in offset order (consume order)."""
    groups: dict[tuple[str, int], list] = {}
    for m in messages:
        groups.setdefault((m.topic(), m.partition()), []).append(m)
    return groups
