"""The way from a served completion to the ``rollouts`` topic, which never holds up a request.

:meth:`RolloutRecorder.record` appends the rollout to a queue and returns at once;
:meth:`RolloutRecorder.later` does less still: it puts aside how to build the rollout, and the
build happens on the recorder's thread, so that the event loop spends nothing on a rollout
between two answers (a backend answers a batch of requests together, and the loop then writes
those answers one after the other: a rollout built between two of them would delay every
answer behind it; ``bench/RESULTS.md``, gateway). Every ``HAND_OVER_S`` that thread builds what
was put aside, all with one ``created_at``, and hands what has queued to the producer, as one
burst: a
produce that finds the producer idle wakes librdkafka's threads, which then send a request to
the broker and report its delivery, and on a gateway answering one request at a time that cost
more CPU than the rest of recording together (``bench/RESULTS.md``, gateway). In a burst only
the first produce wakes them, and the burst goes to the broker as one request. A rollout waits
in the gateway at most ``HAND_OVER_S`` more than it would have; on a crash, what was spooled is
lost either way (the spool is memory).

The spool is that queue and the producer's own, bounded together by ``spool_max`` rollouts; the
producer's messages never time out (``message.timeout.ms=0``): while Kafka is unreachable they
wait, and the idempotent producer delivers them, in order and once each, when it is back. A
rollout that finds the spool full is dropped, and so is one still spooled when the recorder is
closed past its deadline: every drop is counted by reason and logged (the first, then one line
every ``LOG_EVERY_S`` with the count), so nothing is lost silently. ``when_full="wait"`` instead
waits for room (for ``rtrl run``, which must not lose a rollout and can afford to wait).

Keyed by interaction id with the platform's producer settings (murmur2), so a rollout lands on
the partition of its interaction's events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Literal

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer
from ingest.contract import now_ts
from models.rollout import Rollout

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0
HAND_OVER_S = 0.2  # the longest a rollout waits in the gateway before its producer has it
SPOOL_FULL = "spool_full"
SHUTDOWN = "unsent_at_shutdown"
Build = Callable[[str], Rollout | None]  # created_at -> the rollout, or None: there is none
Counted = Callable[[str], None]  # told "recorded", "dropped" or "failed" for each build


class RolloutRecorder:
    def __init__(self, bootstrap: str, topic: str, spool_max: int = 100_000,
                 when_full: Literal["drop", "wait"] = "drop",
                 hand_over_s: float = HAND_OVER_S,
                 producer: Producer | None = None) -> None:  # fmt: skip
        """``producer``: Kafka's, by default made from ``bootstrap`` with the platform's
        settings."""
        if spool_max < 1:
            raise ValueError("spool_max: at least 1")
        self.topic = topic
        self.spool_max = spool_max
        self._when_full = when_full
        self._hand_over_s = hand_over_s
        overrides: dict[str, object] = {"queue.buffering.max.messages": spool_max}
        if when_full == "drop":
            overrides["message.timeout.ms"] = 0  # wait for Kafka as long as it takes
        self._producer = producer or Producer(reliable_producer(bootstrap, **overrides))
        self._aside: deque[tuple[Build, Counted]] = deque()  # to build at the next hand-over
        self._queued: deque[Rollout] = deque()  # recorded, not yet handed to the producer
        self._unacked = 0  # handed to the producer, delivery not yet reported
        self._handing = threading.Lock()  # one hand-over at a time: the order is kept
        self._lock = threading.Lock()
        self.delivered = 0
        self.dropped: Counter[str] = Counter()
        self.errors: list[str] = []
        self._last_log = 0.0
        self._logged_drops = 0
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="rtrl-rollouts", daemon=True)
        self._worker.start()

    def record(self, rollout: Rollout) -> bool:
        """Spool the rollout for Kafka; False when it was dropped (counted and logged)."""
        while self.spooled() >= self.spool_max:
            if self._when_full == "drop":
                self._drop(SPOOL_FULL, 1)
                return False
            time.sleep(0.01)  # room comes as Kafka acknowledges
        self._queued.append(rollout)
        return True

    def later(self, build: Build, counted: Counted) -> None:
        """Put a rollout aside, to be built (``build(created_at)``) and spooled on the
        recorder's thread at the next hand-over; what became of it is told to ``counted``."""
        self._aside.append((build, counted))

    def put_aside(self) -> int:
        """Rollouts put aside and not yet built."""
        return len(self._aside)

    def hand_over(self) -> None:
        """Build what was put aside and hand everything queued to the producer now (the
        gateway's shutdown calls it; the recorder's thread does it every ``hand_over_s``)."""
        self._hand_over()

    def spooled(self) -> int:
        """Rollouts recorded and not yet acknowledged by Kafka (counted here: the producer's
        own queue length also counts the error events it has not yet reported)."""
        return len(self._queued) + self._unacked

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every spooled rollout; returns how many are left."""
        deadline = time.monotonic() + timeout_s
        while (self._queued or self._aside) and time.monotonic() < deadline:
            if not self._hand_over():
                self._producer.poll(0.05)  # the producer is full: deliveries make room
        self._producer.flush(max(0.0, deadline - time.monotonic()))
        return self.spooled()

    def close(self, timeout_s: float = 10.0) -> int:
        """Deliver what is spooled within ``timeout_s``; what is left is dropped (counted)."""
        self._stop.set()
        self._worker.join(2)
        left = self.flush(timeout_s)
        if left:
            self._drop(SHUTDOWN, left)
            self._log_drops(force=True)
        return left

    def drops(self) -> int:
        with self._lock:
            return sum(self.dropped.values())

    def _hand_over(self) -> bool:
        """Build what was put aside, then produce every queued rollout, in order; False when the
        producer had no room left."""
        with self._handing:
            self._build_aside()
            while self._queued:
                rollout = self._queued[0]
                try:
                    self._producer.produce(
                        self.topic,
                        rollout.to_json(),
                        rollout.interaction_id.encode(),
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    return False
                with self._lock:
                    self._unacked += 1
                self._queued.popleft()
            return True

    def _build_aside(self) -> None:
        """Build and spool every rollout put aside so far, all at one ``created_at``; a build
        that fails is counted and logged, and the others are still recorded."""
        n = len(self._aside)
        if not n:
            return
        created_at = now_ts()
        for _ in range(n):
            build, counted = self._aside.popleft()
            try:
                rollout = build(created_at)
            except Exception:  # one rollout's failure must not lose the others
                counted("failed")
                log.exception("a rollout could not be built")
                continue
            if rollout is None:
                continue
            if self.spooled() >= self.spool_max:  # never waits here: this thread makes room
                self._drop(SPOOL_FULL, 1)
                counted("dropped")
                continue
            self._queued.append(rollout)
            counted("recorded")

    def _run(self) -> None:
        while not self._stop.wait(self._hand_over_s):
            self._hand_over()
            self._producer.poll(0)  # delivery reports

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
        with self._lock:
            self._unacked -= 1
        if err is None:
            with self._lock:
                self.delivered += 1
            return
        with self._lock:
            self.errors.append(err.str())
            del self.errors[:-20]
        self._drop(f"kafka_{err.name().lower()}", 1)
