"""Faust's consumer, with the messages of one topic handed over a fetched batch at a time.

Faust 0.15.3 delivers every message on its own: ``Consumer._drain_messages`` awaits
``wait_first(callback(message), suspend_flow.wait())`` per message (two tasks and a wait each),
the conductor wraps it in an event and puts it on a stream's queue, the stream iterates it and
the agent acks it. For the stream join that was most of a worker's time. Here the consumer keeps
all of Faust's group work (membership, assignment, the seek to committed offsets, the flow stops
around rebalances, offset commits of acked messages, the table's changelog recovery) and only
the drain loop changes: the records of ``batch_topic`` that one fetch returns are handed to
``on_batch`` in one call, as aiokafka's ``ConsumerRecord`` (no Faust message per record), and
acked by offset (:meth:`BatchConsumer.ack_offsets`); every other message (the table's changelog
during recovery, Faust's own topics) goes through Faust's callback as before.

What the loop keeps of Faust's ``getmany`` and drain, checked per partition of a fetch rather
than per message: nothing is delivered when flow stopped (a rebalance began; the consumer seeks
back to committed offsets), nor for a partition no longer active; messages below the partition's
read offset are dropped (they were delivered before a seek), gaps in offsets are recorded so
that commits can pass over them (transaction markers), and the read offset advances. The batch
itself is not cancelled when a rebalance suspends flow (Faust's per-message wait can give a
message up after moving past it, the skip that ``streams.offsets`` guards against): ``on_batch``
runs to the end and decides itself what of it is still this worker's. Messages are never tracked
as pending (``track_message``): the join acks what it made durable (``Consumer.ack``), and its
own lock holds rebalances until then.

The private names of Faust this relies on are listed in :mod:`streams.faust_internals`, whose
test checks them on the installed Faust.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.types import TP
from faust.types.tuples import ack_lock
from mode.utils.futures import notify

BatchHandler = Callable[[list[Any]], Awaitable[None]]


class BatchConsumer(AIOKafkaConsumer):
    batch_topic: str | None = None
    on_batch: BatchHandler | None = None

    async def _drain_messages(self, fetcher: Any) -> None:
        consumer_stopped = self._stopped.is_set
        fetcher_stopped = fetcher._stopped.is_set
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                self.diag.set_flag(CONSUMER_FETCHING)
                await self.sleep(0)
                batch = await self._next_batch() if not self.should_stop else []
                self.diag.unset_flag(CONSUMER_FETCHING)
                if batch and self.on_batch is not None:
                    await self.on_batch(batch)
                if self._commit_every is not None and self._n_acked >= self._commit_every:
                    self._n_acked = 0
                    await self.commit()
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    async def _next_batch(self) -> list[Any]:
        """One fetch: what ``Consumer.getmany`` would yield, checked once per partition rather
        than once per message. Messages of other topics go to Faust's callback, in order."""
        records, active = await self._wait_next_records(1.0)
        if not records or self.should_stop:
            return []
        if not self.flow_active:
            await self.perform_seek()  # as getmany: flow stopped after the fetch, seek back
            return []
        batch: list[Any] = []
        for tp, tp_records in records.items():
            if active is not None and tp not in active and tp not in self._buffered_partitions:
                continue
            self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
            if tp.topic == self.batch_topic:
                batch.extend(await self._advance(tp, tp_records))
                continue
            for record in await self._advance(tp, tp_records):
                message = self._to_message(tp, record)
                await self.wait_first(self.callback(message), self.suspend_flow.wait())
        return batch

    async def _advance(self, tp: TP, records: list[Any]) -> list[Any]:
        """The records at or past the partition's read offset; gaps recorded for commits."""
        out = []
        acks = self.app.topics.acks_enabled_for(tp.topic)
        for record in records:
            offset, read = record.offset, self._read_offset[tp]
            if read is not None and offset < read:
                continue  # delivered before the last seek
            if read and offset - read > 1 and acks:
                await self._add_gap(tp, read + 1, offset)
            self._read_offset[tp] = offset
            out.append(record)
        return out

    def ack_offsets(self, tp: TP, offsets: list[int]) -> None:
        """``Consumer.ack`` for many offsets of one partition: the same bookkeeping, from which
        Faust's commits take the highest offset below which everything is acked."""
        with ack_lock:
            committed = self._committed_offset[tp]
            index, acked = self._acked_index[tp], self._acked[tp]
            new = [
                offset
                for offset in offsets
                if (committed is None or offset >= committed) and offset not in index
            ]
            index.update(new)
            acked.extend(new)
            self._n_acked += len(new)
            notify(self._waiting_for_ack)


class BatchApp(faust.App):
    """A Faust app whose consumer is a :class:`BatchConsumer`.

    Faust's stop cancels the fetcher, and with it a batch in progress; ``before_stop`` (given
    to :meth:`consume_in_batches`) is awaited first, so that the batch can finish and no new
    one begins.
    """

    _batches: tuple[Any, BatchHandler, Callable[[], Awaitable[None]]] | None = None

    def consume_in_batches(self, topic: Any, on_batch: BatchHandler,
                           before_stop: Callable[[], Awaitable[None]]) -> None:  # fmt: skip
        """Subscribe to ``topic`` (as an agent iterating it would) and hand its messages to
        ``on_batch``, one fetched batch at a time."""
        self._batches = (topic, on_batch, before_stop)

    def _new_consumer(self) -> BatchConsumer:
        consumer = BatchConsumer(
            self.transport,
            callback=self.topics.on_message,
            on_partitions_revoked=self._on_partitions_revoked,
            on_partitions_assigned=self._on_partitions_assigned,
            beacon=self.beacon,
            loop=self.transport.loop,
        )
        if self._batches is not None:
            topic, on_batch, _ = self._batches
            consumer.batch_topic, consumer.on_batch = topic.get_topic_name(), on_batch
        return consumer

    async def on_start(self) -> None:
        await super().on_start()
        if self._batches is not None:
            self.topics.add(self._batches[0])  # what an agent's stream does when it starts

    async def on_stop(self) -> None:
        if self._batches is not None:
            await self._batches[2]()
        await super().on_stop()
