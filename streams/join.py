"""The worker's loop body: chunks of messages through the partition processors, durably.

For each chunk (and each idle tick) the order is fixed, and it is what makes a crash harmless:

1. validate; invalid messages are set aside for ``telemetry.dlq``;
2. step each partition's processor: table writes (state + the partition's *pending* ids);
3. wait until every changelog write is acknowledged (acks=all); not ``producer.flush()``, which
   may return with writes still queued (see ``streams.tablestore.ChangelogTable``);
4. publish records, late events and DLQ entries, and wait for every acknowledgement;
5. clear *pending* (a table write), then ack the chunk's input events.

Faust commits only acked offsets (see ``streams.app``), so no offset is committed before its
state, records and DLQ entries are durable. One chunk runs at a time (a lock shared with the idle
tick); an error stops the process before any ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import orjson

from streams.clean_stop import CLEAN_MARKER
from streams.exit_codes import EXIT_FAILED_CHUNK, EXIT_OFFSET_HOLE
from streams.intake import Rejected, read_message
from streams.metrics import WorkerMetrics
from streams.offsets import Hole, HoleLog, OffsetGuard, Verdict
from streams.processor import Incoming, PartitionProcessor, StepOutput
from streams.seek_start import ResumeOffsets
from streams.settings import WorkerSettings
from streams.tablestore import TableStore, partition_context

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

    def __init__(self, app: Any, table: Any, settings: WorkerSettings) -> None:
        self.app, self.table, self.settings = app, table, settings
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
        self._last_progress = (time.monotonic(), 0)

    # --- rebalancing ----------------------------------------------------------------------
    async def wait_idle(self) -> None:
        """Partitions are being revoked: let the chunk in flight finish (and become durable)."""
        async with self.lock:
            pass

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
            store = TableStore(self.table, partition)
            proc = PartitionProcessor(
                partition,
                self.settings.reward,
                store,
                wall_us=_wall_us(),
                deadlines_in_memory=self.settings.deadlines_in_memory,
            )
            with partition_context(self.topics.events, partition):
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
    async def handle_chunk(self, stream: Any, events: Sequence[Any]) -> None:
        started = time.perf_counter()
        try:
            async with self.lock:
                done = await self._handle_chunk(events)
            for event in done:
                await stream.ack(event)
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
            await self.table.changelog_acknowledged()
            if steps:
                await self._publish(steps, [])
        self._maybe_log_progress()

    # --- internals ------------------------------------------------------------------------
    async def _keep_local_store(self) -> None:
        """Before a restart for a hole: once every table write is in the changelog, the local
        store is as good as a clean stop's, and the next start need not restore it all."""
        try:
            await asyncio.wait_for(self.table.changelog_acknowledged(), 30)
        except Exception:  # noqa: BLE001 - then the next start restores from the changelog
            log.warning("changelog writes unacknowledged; the local store will be rebuilt")
            return
        (self.settings.data_dir / CLEAN_MARKER).touch()

    async def _current(self, events: Sequence[Any]) -> list[Any]:
        """The chunk's events of partitions still assigned, checked for holes in offsets.

        An event fetched before the last rebalance is processed if its partition stayed here:
        the guard expects the partition's committed offset, and Faust may not deliver that
        offset again (its read offset has moved past it). One of a partition that left is
        skipped, unacked: its new owner reads it.
        """
        owned = self.app.consumer.assignment()
        generation = self.app.consumer_generation_id
        current = [e for e in events if e.message.tp in owned]
        unknown = {
            e.message.partition
            for e in current
            if not self.guard.knows(generation, e.message.partition)
        }
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
        for event in current:
            partition, offset = event.message.partition, event.message.offset
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

    async def _handle_chunk(self, events: Sequence[Any]) -> list[Any]:
        """Process the chunk's events of partitions still assigned; return those to ack."""
        wall = _wall_us()
        by_partition: dict[int, list[Incoming]] = {}
        rejected: list[tuple[Rejected, Any]] = []
        done = await self._current(events)
        for event in done:
            message = event.message
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
        await self.table.changelog_acknowledged()  # state and pending ids before any record
        await self._publish(steps, rejected)
        self.metrics.events.inc(len(done))
        return done

    async def _publish(self, steps: list[tuple[PartitionProcessor, StepOutput]],
                       rejected: list[tuple[Rejected, Any]]) -> None:  # fmt: skip
        producer, topics = self.app.producer, self.topics
        pending = []
        for _, out in steps:
            for record in out.records:
                pending.append(
                    await producer.send(
                        topics.rewards,
                        record.interaction_id.encode(),
                        orjson.dumps(record.to_json_dict()),
                        None,
                        None,
                        None,
                    )
                )
            for item, arrival in out.late:
                pending.append(
                    await producer.send(
                        topics.late,
                        str(item.event["interaction_id"]).encode(),
                        item.raw,
                        None,
                        None,
                        [("rtrl.arrival", arrival.value.encode())],
                    )
                )
        for reject, message in rejected:
            pending.append(
                await producer.send(
                    topics.dlq,
                    None,
                    reject.raw,
                    None,
                    None,
                    reject.headers(message.topic, message.partition, message.offset),
                )
            )
        if pending:
            await asyncio.gather(*pending)  # every acknowledgement, or an exception
        for proc, out in steps:
            if out.records:
                with partition_context(self.topics.events, proc.partition):
                    proc.published()
            self.metrics.records.inc(len(out.records))
            for _, arrival in out.late:
                self.metrics.late.labels(arrival.value).inc()
        for reject, _ in rejected:
            self.metrics.dlq.labels(reject.reason).inc()
        await self.table.send_changelog_writes()  # the cleared pending lists; no wait needed

    def _step(self, proc: PartitionProcessor, items: Sequence[Incoming],
              **clock: Any) -> StepOutput:  # fmt: skip
        rescans = proc.rescans
        with partition_context(self.topics.events, proc.partition):
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
