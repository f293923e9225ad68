"""The worker's loop body: fetched batches of messages through the partition processors, durably.

For each batch (and each idle tick) the order is fixed, and it is what makes a crash harmless:

1. validate; invalid messages are set aside for ``telemetry.dlq``;
2. step each partition's processor: store writes (state + the partition's *pending* ids), each
   also handed to the outbox for the table's changelog;
3. wait until Kafka acknowledged every write handed over so far (``Outbox.durable``, acks=all);
4. publish records, late events and DLQ entries through the same outbox, and wait again;
5. clear *pending* (a store write), then ack the batch's input messages.

Faust commits only acked offsets, so no offset is committed before its state, records and DLQ
entries are durable. One batch runs at a time (a lock shared with the idle tick, rebalances and
the stop); an error stops the process before any ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson
from faust.types import TP

from rewards.tenant_keys import rewards_key
from streams.clean_stop import CLEAN_MARKER
from streams.exit_codes import EXIT_FAILED_CHUNK, EXIT_OFFSET_HOLE
from streams.intake import Rejected, read_message
from streams.late_shares import LateShares
from streams.metrics import WorkerMetrics
from streams.offsets import Hole, HoleLog, OffsetGuard, Verdict
from streams.outbox import Outbox
from streams.processor import Incoming, PartitionProcessor, StepOutput
from streams.seek_start import ResumeOffsets
from streams.settings import WorkerSettings
from streams.tablestore import TableStore, record_changelog_offsets

log = logging.getLogger("streams.worker")
HOLE_LOG = "offset-holes.json"


class OffsetHoleError(Exception):
    def __init__(self, hole: Hole) -> None:
        super().__init__(str(hole))
        self.hole = hole


def _wall_us() -> int:
    return time.time_ns() // 1000


def _exit(code: int) -> None:
    """End the process now, without Faust's shutdown (which would commit what it has)."""
    logging.shutdown()
    os._exit(code)


class JoinWorker:
    """The partitions this process owns, their processors, and the order of effects above."""

    def __init__(self, app: Any, table: Any, settings: WorkerSettings, outbox: Outbox) -> None:
        self.app, self.table, self.settings, self.outbox = app, table, settings, outbox
        self.closing = False
        self.topics = settings.topics
        self.lock = asyncio.Lock()
        self.processors: dict[int, PartitionProcessor] = {}
        self.next_offset: dict[int, int] = {}
        self.guard = OffsetGuard()
        self.holes = HoleLog(settings.data_dir / HOLE_LOG)
        self.resume_offsets = ResumeOffsets(
            settings.bootstrap, settings.group_id, settings.topics.events
        )
        self.metrics = WorkerMetrics()
        self.late_shares = LateShares()
        self._last_progress = (time.monotonic(), 0)

    # --- rebalancing ----------------------------------------------------------------------
    async def wait_idle(self) -> None:
        """Partitions are being revoked: let the batch in flight finish (and become durable)."""
        async with self.lock:
            pass

    async def close(self) -> None:
        """The app stops: let the batch in flight finish; begin no other one."""
        self.closing = True
        await self.wait_idle()

    async def keep_partitions(self, partitions: set[int]) -> None:
        """The new assignment: processors of partitions that left are dropped; one that comes
        back later is rebuilt from the table (its owner in between changed it). A partition kept
        through the rebalance keeps its processor: nobody else can have owned it meanwhile."""
        async with self.lock:
            for p in set(self.processors) - partitions:
                del self.processors[p]
                self.next_offset.pop(p, None)
                with contextlib.suppress(KeyError):
                    self.metrics.lag.remove(str(p))

    async def _processor(self, partition: int) -> PartitionProcessor:
        proc = self.processors.get(partition)
        if proc is None:
            store = TableStore(self.table, partition, self.outbox)
            proc = PartitionProcessor(
                partition,
                self.settings.reward,
                store,
                wall_us=_wall_us(),
                deadlines_in_memory=self.settings.deadlines_in_memory,
            )
            leftovers = proc.recover()
            if leftovers:
                log.info(
                    "partition %d: republishing %d records a crash left pending",
                    partition,
                    len(leftovers),
                )
                await self._publish([(proc, StepOutput(records=leftovers))], [])
            log.info(
                "partition %d: %d open interactions, %d closed ids remembered",
                partition,
                proc.open_count,
                proc.closed_count,
            )
            self.processors[partition] = proc
        return proc

    # --- the two entry points -------------------------------------------------------------
    async def handle_batch(self, messages: Sequence[Any]) -> None:
        """One fetched batch: processed, made durable, then acked (unacked if closing)."""
        started = time.perf_counter()
        try:
            async with self.lock:
                if self.closing:
                    return  # read again after the restart
                done = await self._handle_chunk(messages)
                self._ack(done)
            self.metrics.chunk_seconds.observe(time.perf_counter() - started)
        except OffsetHoleError as exc:
            log.error(
                "%s: messages were skipped by the consumer; acking nothing and exiting "
                "so that a fresh consumer reads them again",
                exc.hole,
            )
            self.holes.remember(exc.hole)
            await self._keep_local_store()
            _exit(EXIT_OFFSET_HOLE)
        except BaseException:  # noqa: BLE001 - nothing of this chunk may be acked
            log.exception("a chunk failed; stopping without acking it (it is processed again)")
            _exit(EXIT_FAILED_CHUNK)
        self._maybe_log_progress()

    async def tick(self) -> None:
        """Idle partitions: let the wall clock close their windows."""
        if self.app.rebalancing or self.app.in_recovery:
            return
        async with self.lock:
            if self.app.rebalancing or self.app.in_recovery:
                return  # it began while we waited: the partitions may be leaving
            wall = _wall_us()
            steps = []
            for tp in self.app.consumer.assignment():
                if tp.topic != self.topics.events:
                    continue
                proc = await self._processor(tp.partition)
                lag = await self._lag(tp)
                if lag is not None:
                    self.metrics.lag.labels(str(tp.partition)).set(lag)
                idle = proc.clock.is_idle(wall, lag is not None and lag <= 0)
                out = self._step(
                    proc,
                    [],
                    wall_us=proc.clock.last_arrival_wall_us,
                    idle_wall_us=wall if idle else None,
                )
                if out.records:
                    steps.append((proc, out))
            self.metrics.open.set(sum(p.open_count for p in self.processors.values()))
            await self._state_durable()
            if steps:
                await self._publish(steps, [])
        self._maybe_log_progress()

    # --- internals ------------------------------------------------------------------------
    async def _keep_local_store(self) -> None:
        """Before a restart for a hole: once every table write is in the changelog, the local
        store is as good as a clean stop's, and the next start need not restore it all."""
        try:
            await self.outbox.durable(timeout_s=30)
        except Exception:  # noqa: BLE001 - then the next start restores from the changelog
            log.warning("changelog writes unacknowledged; the local store will be rebuilt")
            return
        (self.settings.data_dir / CLEAN_MARKER).touch()

    async def _current(self, messages: Sequence[Any]) -> list[Any]:
        """The batch's messages of partitions still assigned, checked for holes in offsets.

        A message fetched before the last rebalance is processed if its partition stayed here:
        the guard expects the partition's committed offset, and Faust may not deliver that
        offset again (its read offset has moved past it). One of a partition that left is
        skipped, unacked: its new owner reads it.
        """
        topic = self.topics.events
        owned = {tp.partition for tp in self.app.consumer.assignment() if tp.topic == topic}
        generation = self.app.consumer_generation_id
        current = [m for m in messages if m.partition in owned]
        unknown = {m.partition for m in current if not self.guard.knows(generation, m.partition)}
        if unknown:
            # A partition this worker kept through the rebalance may go on where it was rather
            # than at its committed offset (Faust seeks only where a commit exists): what this
            # worker has processed and made durable is not a hole.
            starts = {
                p: max(offset, self.next_offset.get(p, offset))
                for p, offset in (await self.resume_offsets.fetch(sorted(unknown))).items()
            }
            self.guard.begin(generation, starts)
            log.info("consumer generation %s: partitions resume at %s", generation, starts)
        for message in current:
            partition, offset = message.partition, message.offset
            if self.guard.check(partition, offset) is Verdict.hole:
                hole = self.guard.hole_at(partition, offset)
                if not self.holes.seen_before(hole):
                    raise OffsetHoleError(hole)
                log.warning(
                    "%s again after a restart: a gap in the log itself (a transaction "
                    "marker or compaction), accepted",
                    hole,
                )
                self.guard.accept_gap(partition, offset)
        return current

    async def _handle_chunk(self, messages: Sequence[Any]) -> list[Any]:
        """Process the batch's messages of partitions still assigned; return those to ack."""
        wall = _wall_us()
        by_partition: dict[int, list[Incoming]] = {}
        rejected: list[tuple[Rejected, Any]] = []
        done = await self._current(messages)
        for message in done:
            item = read_message(message.key, message.value)
            if isinstance(item, Rejected):
                rejected.append((item, message))
            else:
                by_partition.setdefault(message.partition, []).append(item)
            self.next_offset[message.partition] = max(
                message.offset + 1, self.next_offset.get(message.partition, 0)
            )
        steps = []
        for partition, items in by_partition.items():
            proc = await self._processor(partition)
            steps.append((proc, self._step(proc, items, wall_us=wall)))
        self._count_types(by_partition, steps)
        await self._state_durable()  # state and pending ids before any record
        await self._publish(steps, rejected)
        self.metrics.events.inc(len(done))
        return done

    def _count_types(self, by_partition: dict[int, list[Incoming]],
                     steps: list[tuple[PartitionProcessor, StepOutput]]) -> None:  # fmt: skip
        """Every valid event by type, the late ones among them, and the warning of an outcome
        type that comes late too often for its rewards to be true (``streams.late_shares``)."""
        types = [str(i.event.get("type")) for items in by_partition.values() for i in items]
        late = [str(i.event.get("type")) for _, out in steps for i, _ in out.late]
        for event_type, n in Counter(types).items():
            self.metrics.events_by_type.labels(event_type).inc(n)
        self.late_shares.count(types, late)
        window = self.settings.reward.window_s
        for line in self.late_shares.warnings(time.monotonic(), window):
            log.warning("%s", line)

    def _ack(self, done: Sequence[Any]) -> None:
        offsets: dict[int, list[int]] = {}
        for record in done:
            offsets.setdefault(record.partition, []).append(record.offset)
        for partition, acked in offsets.items():
            self.app.consumer.ack_offsets(TP(self.topics.events, partition), acked)

    async def _state_durable(self) -> None:
        """Every store write so far is in the changelog; the store learns how far."""
        await self.outbox.durable()
        record_changelog_offsets(self.table, self.outbox, set(self.processors))

    async def _publish(self, steps: list[tuple[PartitionProcessor, StepOutput]],
                       rejected: list[tuple[Rejected, Any]]) -> None:  # fmt: skip
        send, topics = self.outbox.send, self.topics
        for _, out in steps:
            for record in out.records:
                send(
                    topics.rewards,
                    rewards_key(record.org_id, record.interaction_id),
                    orjson.dumps(record.to_json_dict()),
                )
            for item, arrival in out.late:
                send(
                    topics.late,
                    str(item.event["interaction_id"]).encode(),
                    item.raw,
                    headers=[("rtrl.arrival", arrival.value.encode())],
                )
        for reject, message in rejected:
            send(
                topics.dlq,
                None,
                reject.raw,
                headers=reject.headers(message.topic, message.partition, message.offset),
            )
        await self.outbox.durable()  # every acknowledgement, or an exception
        for proc, out in steps:
            if out.records:
                proc.published()  # the cleared pending list; waited for with the next writes
            self.metrics.records.inc(len(out.records))
            for item, arrival in out.late:
                self.metrics.late.labels(arrival.value).inc()
                self.metrics.late_by_type.labels(str(item.event.get("type"))).inc()
        for reject, _ in rejected:
            self.metrics.dlq.labels(reject.reason).inc()

    def _step(self, proc: PartitionProcessor, items: Sequence[Incoming],
              **clock: Any) -> StepOutput:  # fmt: skip
        rescans = proc.rescans
        out = proc.step(items, **clock)
        self.metrics.rescans.inc(proc.rescans - rescans)
        return out

    async def _lag(self, tp: Any) -> int | None:
        """Messages between this worker's position and the partition's end (None: unknown)."""
        highwater = self.app.consumer.highwater(tp)
        position = self.next_offset.get(tp.partition)
        if position is None:
            position = await self.app.consumer.position(tp)
        if highwater is None or position is None:
            return None
        return max(0, highwater - position)

    def _maybe_log_progress(self) -> None:
        now = time.monotonic()
        since, events_then = self._last_progress
        if now - since < self.settings.progress_s:
            return
        totals = self.metrics.totals()
        rate = (totals["events"] - events_then) / (now - since)
        self._last_progress = (now, totals["events"])
        open_now = sum(p.open_count for p in self.processors.values())
        log.info(
            "progress events=%d rate=%.0f/s open=%d records=%d late=%d dlq=%d chunks=%d",
            totals["events"],
            rate,
            open_now,
            totals["records"],
            totals["late"],
            totals["dlq"],
            totals["chunks"],
        )
