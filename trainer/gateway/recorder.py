"""The way from a served completion to the ``rollouts`` topic, which never holds up a request.

:meth:`RolloutRecorder.record` hands the rollout to the producer and returns at once. The spool
is the producer's own queue, bounded by ``spool_max`` rollouts, and its messages never time out
(``message.timeout.ms=0``): while Kafka is unreachable they wait, and the idempotent producer
delivers them, in order and once each, when it is back. A rollout that finds the spool full is
dropped, and so is one still spooled when the recorder is closed past its deadline: every drop is
counted by reason and logged (the first, then one line every ``LOG_EVERY_S`` with the count), so
nothing is lost silently. ``when_full="wait"`` instead waits for room (for ``rtrl run``, which
must not lose a rollout and can afford to wait).

Keyed by interaction id with the platform's producer settings (murmur2), so a rollout lands on
the partition of its interaction's events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Literal

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer
from trainer.rollout import Rollout

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0
SPOOL_FULL = "spool_full"
SHUTDOWN = "unsent_at_shutdown"


class RolloutRecorder:
    def __init__(self, bootstrap: str, topic: str, spool_max: int = 100_000,
                 when_full: Literal["drop", "wait"] = "drop") -> None:  # fmt: skip
        if spool_max < 1:
            raise ValueError("spool_max: at least 1")
        self.topic = topic
        self.spool_max = spool_max
        self._when_full = when_full
        overrides: dict[str, object] = {"queue.buffering.max.messages": spool_max}
        if when_full == "drop":
            overrides["message.timeout.ms"] = 0  # wait for Kafka as long as it takes
        self._producer = Producer(reliable_producer(bootstrap, **overrides))
        self._lock = threading.Lock()
        self.delivered = 0
        self.dropped: Counter[str] = Counter()
        self.errors: list[str] = []
        self._last_log = 0.0
        self._logged_drops = 0
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="rtrl-rollouts", daemon=True)
        self._poller.start()

    def record(self, rollout: Rollout) -> bool:
        """Spool the rollout for Kafka; False when it was dropped (counted and logged)."""
        value, key = rollout.to_json(), rollout.interaction_id.encode()
        while True:
            try:
                self._producer.produce(self.topic, value, key, on_delivery=self._on_delivery)
                return True
            except BufferError:
                if self._when_full == "drop":
                    self._drop(SPOOL_FULL, 1)
                    return False
                self._producer.poll(0.05)

    def spooled(self) -> int:
        """Rollouts handed over and not yet acknowledged by Kafka."""
        return len(self._producer)

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every spooled rollout; returns how many are left."""
        return int(self._producer.flush(timeout_s))

    def close(self, timeout_s: float = 10.0) -> int:
        """Deliver what is spooled within ``timeout_s``; what is left is dropped (counted)."""
        left = self.flush(timeout_s)
        self._stop.set()
        self._poller.join(2)
        if left:
            self._drop(SHUTDOWN, left)
            self._log_drops(force=True)
        return left

    def drops(self) -> int:
        with self._lock:
            return sum(self.dropped.values())

    def _drop(self, reason: str, n: int) -> None:
        with self._lock:
            self.dropped[reason] += n
        self._log_drops()

    def _log_drops(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            total = sum(self.dropped.values())
            if total == self._logged_drops or (
                not force and self._logged_drops and now - self._last_log < LOG_EVERY_S
            ):
                return
            self._last_log, self._logged_drops = now, total
            by_reason = dict(self.dropped)
        log.warning(
            "rollouts dropped, %d so far (%s); the spool holds %d of %d",
            total,
            by_reason,
            self.spooled(),
            self.spool_max,
        )

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            with self._lock:
                self.delivered += 1
            return
        with self._lock:
            self.errors.append(err.str())
            del self.errors[:-20]
        self._drop(f"kafka_{err.name().lower()}", 1)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)
