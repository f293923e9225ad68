"""Following the compacted ``checkpoints`` topic: every announcement, from the beginning, handed
to a callback on a thread of its own.

Read from offset 0 of every partition (never a committed offset: the topic is compacted, so
reading it whole is cheap and says every decision the trainer made). What to do with an
announcement is the caller's: :func:`moves_forward` is the serving side's rule.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from checkpoints.publish import decode_announcement
from checkpoints.record import PROMOTED, CheckpointInfo
from infra.acls import SERVING_GROUP
from infra.settings import client

log = logging.getLogger(__name__)


def moves_forward(info: CheckpointInfo, current: CheckpointInfo) -> bool:
    """Serve ``info`` instead of ``current``? Only a promoted checkpoint newer than the served
    one: a rejected one never, an older one (a replay of the topic) never; a rollback is a new
    id with old weights, so serving only ever moves forward."""
    return info.status == PROMOTED and (info.created_at, info.checkpoint_id) > (
        current.created_at,
        current.checkpoint_id,
    )


class CheckpointFollower:
    def __init__(self, bootstrap: str, topic: str,
                 on_announcement: Callable[[CheckpointInfo], object]) -> None:  # fmt: skip
        self._bootstrap = bootstrap
        self._topic = topic
        self._on_announcement = on_announcement
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._follow, name="rtrl-checkpoints", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _follow(self) -> None:
        consumer = Consumer(
            client(
                self._bootstrap,
                **{
                    "group.id": SERVING_GROUP,
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                },
            )
        )
        topic = self._topic
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                value = message.value()
                if value is None:  # a tombstone withdraws an announcement: nothing to load
                    continue
                info = decode_announcement(message.key(), value, topic)
                if info is None:
                    continue
                try:
                    self._on_announcement(info)
                except Exception:  # one checkpoint that fails to load must not stop the rest
                    log.exception("serving: %s could not be taken up", info.checkpoint_id)
        except Exception:  # a follower that dies must say so; serving goes on with what it has
            log.exception("serving: stopped following %s", topic)
        finally:
            consumer.close()
