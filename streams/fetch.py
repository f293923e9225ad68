"""Faust's consumer, with the messages of one topic handed over a fetched batch at a time.

Faust 0.15.3 delivers every message on its own: ``Consumer._drain_messages`` awaits
``wait_first(callback(message), suspend_flow.wait())`` per message (two tasks and a wait each),
the conductor wraps it in an event and puts it on a stream's queue, the stream iterates it and
the agent acks it. For the stream join that was most of a worker's time. Here the consumer
keeps all of Faust's group work (membership, assignment, the seek to committed offsets, the
flow stops around rebalances, offset commits of acked messages, the table's changelog recovery)
and only the drain loop changes: the messages of ``batch_topic`` that one ``getmany`` returns are
handed to ``on_batch`` in one call; every other message (the table's changelog during recovery,
Faust's own topics) goes through Faust's callback as before.

What the loop keeps of Faust's per message: messages below the partition's read offset are
dropped (they were delivered before a seek), gaps in offsets are recorded so that commits can
pass over them (transaction markers), and the read offset advances. The batch itself is not
cancelled when a rebalance suspends flow (Faust's per-message wait can give a message up after
moving past it, the skip that ``streams.offsets`` guards against): ``on_batch`` runs to the end
and decides itself what of it is still this worker's. Messages are never tracked as pending
(``track_message``): the join acks what it made durable (``Consumer.ack``), and its own lock
holds rebalances until then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer

BatchHandler = Callable[[list[Any]], Awaitable[None]]


class BatchConsumer(AIOKafkaConsumer):
    batch_topic: str | None = None
    on_batch: BatchHandler | None = None

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - Faust's loop
        callback = self.callback
        consumer_stopped = self._stopped.is_set
        fetcher_stopped = fetcher._stopped.is_set
        read_offsets = self._read_offset
        acks_enabled_for = self.app.topics.acks_enabled_for
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                self.diag.set_flag(CONSUMER_FETCHING)
                batch: list[Any] = []
                await self.sleep(0)
                if not self.should_stop:
                    async for tp, message in self.getmany(timeout=1.0):
                        offset = message.offset
                        read = read_offsets[tp]
                        if read is not None and offset < read:
                            continue  # delivered before the last seek
                        if read and offset - read > 1 and acks_enabled_for(message.topic):
                            await self._add_gap(tp, read + 1, offset)
                        if tp.topic == self.batch_topic:
                            batch.append(message)
                        else:
                            await self.wait_first(callback(message), self.suspend_flow.wait())
                        read_offsets[tp] = offset
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
