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
in the gateway at most ``HAND_OVER_S`` more than it would have.

The spool is that queue and the producer's own, bounded together by ``spool_max`` rollouts and
``spool_max_bytes`` bytes of them; the producer's messages never time out
(``message.timeout.ms=0``): while Kafka is unreachable they wait, and the idempotent producer
delivers them, in order and once each, when it is back. With a disk spool
(``serving.rollouts.spool``) each burst is also written there before the producer gets it
(write-ahead, off the event loop) and stays until Kafka acknowledged each of its rollouts, so
a gateway killed while Kafka is down loses none: the next start finds them and delivers them
before anything new (at least once: a rollout acknowledged just before the kill can come
again). Without one, what is spooled when the process dies is lost. A rollout that finds the
spool full is dropped (``spool_full``: too many rollouts, ``spool_bytes_full``: too many
bytes), and so is one still spooled in memory only when the recorder is closed past its
deadline: every drop is counted by reason and logged (the first, then one line every
``LOG_EVERY_S`` with the count), so nothing is lost silently. ``when_full="wait"`` instead
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
from functools import partial
from itertools import islice
from typing import Literal

from confluent_kafka import KafkaError, Message, Producer

from infra.settings import reliable_producer
from ingest.contract import now_ts
from models.rollout import Rollout
from serving.rollouts.spool import RolloutSpool, SpoolCounts

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0
HAND_OVER_S = 0.2  # the longest a rollout waits in the gateway before its producer has it
SPOOL_MAX_BYTES = 256 << 20
SPOOL_FULL = "spool_full"
SPOOL_BYTES_FULL = "spool_bytes_full"
SHUTDOWN = "unsent_at_shutdown"
Build = Callable[[str], Rollout | None]  # created_at -> the rollout, or None: there is none
Counted = Callable[[str], None]  # told "recorded", "dropped" or "failed" for each build
Ready = tuple[bytes, bytes, int | None]  # key, value, its disk spool segment (None: not on disk)


class RolloutRecorder:
    def __init__(self, bootstrap: str, topic: str, spool_max: int = 100_000,
                 when_full: Literal["drop", "wait"] = "drop",
                 hand_over_s: float = HAND_OVER_S,
                 producer: Producer | None = None, spool: RolloutSpool | None = None,
                 spool_max_bytes: int = SPOOL_MAX_BYTES) -> None:  # fmt: skip
        """``producer``: Kafka's, by default made from ``bootstrap`` with the platform's
        settings. ``spool``: the disk spool, whose rollouts left by an earlier process go out
        first."""
        if spool_max < 1 or spool_max_bytes < 1:
            raise ValueError("spool_max, spool_max_bytes: at least 1")
        self.topic = topic
        self.spool_max = spool_max
        self.spool_max_bytes = spool_max_bytes
        self._when_full = when_full
        self._hand_over_s = hand_over_s
        overrides: dict[str, object] = {
            "queue.buffering.max.messages": spool_max,
            # librdkafka's own bound above ours (its count includes per-message overhead)
            "queue.buffering.max.kbytes": min(2**31 - 1, max(1 << 20, spool_max_bytes >> 9)),
        }
        if when_full == "drop" or spool is not None:
            overrides["message.timeout.ms"] = 0  # wait for Kafka as long as it takes
        self._producer = producer or Producer(reliable_producer(bootstrap, **overrides))
        self._spool = spool
        self._aside: deque[tuple[Build, Counted]] = deque()  # to build at the next hand-over
        self._queued: deque[tuple[bytes, bytes]] = deque()  # recorded, not yet on disk
        self._ready: deque[Ready] = deque()  # on disk (with a spool), not yet produced
        self._unacked = 0  # handed to the producer, delivery not yet reported
        self._bytes = 0  # of every rollout recorded and not yet acknowledged
        self._memory_only = 0  # of those, rollouts on no disk: lost if the process dies
        self._handing = threading.Lock()  # one hand-over at a time: the order is kept
        self._lock = threading.Lock()
        self.delivered = 0
        self.write_errors = 0  # rollouts the disk spool could not take (kept in memory)
        self.dropped: Counter[str] = Counter()
        self.errors: list[str] = []
        self._last_log = 0.0
        self._logged_drops = 0
        self._last_write_error_log = 0.0
        if spool is not None:
            for key, value, segment in spool.recover():
                self._ready.append((key, value, segment))
                self._bytes += len(value)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="rtrl-rollouts", daemon=True)
        self._worker.start()

    def record(self, rollout: Rollout) -> bool:
        """Spool the rollout for Kafka; False when it was dropped (counted and logged)."""
        value = rollout.to_json()
        while (full := self._full(len(value))) is not None:
            if self._when_full == "drop" or len(value) > self.spool_max_bytes:
                self._drop(full, 1)
                return False
            time.sleep(0.01)  # room comes as Kafka acknowledges
        self._enqueue(rollout.interaction_id.encode(), value)
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
        return len(self._queued) + len(self._ready) + self._unacked

    def pending(self) -> int:
        """Rollouts answered and not yet acknowledged by Kafka: put aside or spooled."""
        return len(self._aside) + self.spooled()

    def spooled_bytes(self) -> int:
        return self._bytes

    def spool_counts(self) -> SpoolCounts | None:
        """What the disk spool did (None: there is none)."""
        return self._spool.counts() if self._spool is not None else None

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every spooled rollout; returns how many are left."""
        deadline = time.monotonic() + timeout_s
        while (self._queued or self._ready or self._aside) and time.monotonic() < deadline:
            if not self._hand_over():
                self._producer.poll(0.05)  # the producer is full: deliveries make room
        self._producer.flush(max(0.0, deadline - time.monotonic()))
        return self.spooled()

    def close(self, timeout_s: float = 10.0) -> int:
        """Deliver what is spooled within ``timeout_s``; returns how many rollouts were lost:
        those left only in memory are dropped (counted), those on disk stay there for the next
        start."""
        self._stop.set()
        self._worker.join(2)
        left = self.flush(timeout_s)
        lost = len(self._queued) + self._memory_only
        if lost:
            self._drop(SHUTDOWN, lost)
            self._log_drops(force=True)
        if self._spool is not None:
            if left - lost:
                log.warning(
                    "%d rollouts not yet acknowledged by Kafka stay in %s: the next start "
                    "delivers them",
                    left - lost,
                    self._spool.folder,
                )
            self._spool.close()
        return lost

    def drops(self) -> int:
        with self._lock:
            return sum(self.dropped.values())

    def _full(self, size: int) -> str | None:
        """Why the spool cannot take ``size`` more bytes now, or None when it can."""
        if self.spooled() >= self.spool_max:
            return SPOOL_FULL
        if self._bytes + size > self.spool_max_bytes:
            return SPOOL_BYTES_FULL
        return None

    def _enqueue(self, key: bytes, value: bytes) -> None:
        with self._lock:
            self._bytes += len(value)
        self._queued.append((key, value))

    def _hand_over(self) -> bool:
        """Build what was put aside, write it to the disk spool, then produce every rollout
        ready, in order; False when the producer had no room left."""
        with self._handing:
            self._build_aside()
            self._write_ahead()
            while self._ready:
                key, value, segment = self._ready[0]
                try:
                    self._producer.produce(
                        self.topic,
                        value,
                        key,
                        on_delivery=partial(self._on_delivery, segment, len(value)),
                    )
                except BufferError:
                    return False
                with self._lock:
                    self._unacked += 1
                self._ready.popleft()
            return True

    def _write_ahead(self) -> None:
        """Move what is queued to ``_ready``, through the disk spool when there is one (a
        failed write keeps the rollouts, in memory only, counted and logged)."""
        n = len(self._queued)
        if not n:
            return
        batch = list(islice(self._queued, n))
        segment = None
        if self._spool is not None:
            try:
                segment = self._spool.append(batch)
            except OSError as exc:
                self._write_failed(n, exc)
        if segment is None:
            with self._lock:
                self._memory_only += n
        self._ready.extend((key, value, segment) for key, value in batch)
        for _ in range(n):
            self._queued.popleft()

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
                value = rollout.to_json() if rollout is not None else b""
            except Exception:  # one rollout's failure must not lose the others
                counted("failed")
                log.exception("a rollout could not be built")
                continue
            if rollout is None:
                continue
            full = self._full(len(value))  # never waits here: this thread makes room
            if full is not None:
                self._drop(full, 1)
                counted("dropped")
                continue
            self._enqueue(rollout.interaction_id.encode(), value)
            counted("recorded")

    def _run(self) -> None:
        while not self._stop.wait(self._hand_over_s):
            self._hand_over()
            self._producer.poll(0)  # delivery reports
            if self._spool is not None:
                self._spool.tick()

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
            "rollouts dropped, %d so far (%s); the spool holds %d of %d (%d of %d bytes)",
            total,
            by_reason,
            self.spooled(),
            self.spool_max,
            self._bytes,
            self.spool_max_bytes,
        )

    def _write_failed(self, n: int, exc: OSError) -> None:
        with self._lock:
            self.write_errors += n
        now = time.monotonic()
        if now - self._last_write_error_log >= LOG_EVERY_S:
            self._last_write_error_log = now
            log.error("the rollout spool could not write %d rollouts (kept in memory only; "
                      "%d so far): %s", n, self.write_errors, exc)  # fmt: skip

    def _on_delivery(self, segment: int | None, size: int, err: KafkaError | None,
                     _msg: Message) -> None:  # fmt: skip
        with self._lock:
            self._unacked -= 1
            self._bytes -= size
            if segment is None:
                self._memory_only -= 1
            if err is None:
                self.delivered += 1
            else:
                self.errors.append(err.str())
                del self.errors[:-20]
        if err is not None:
            self._drop(f"kafka_{err.name().lower()}", 1)
        if segment is not None and self._spool is not None:
            self._spool.confirm(segment)
