"""The background sender: moves emitted events into the spool, sends them in batches, retries.

One thread per client. It owns the spool (opened in the thread) and the HTTP transport. A batch is
sent when it is full (``batch_max_events``; bytes cap its size), when ``flush_interval_s`` passed
since the last send, or when a flush or close asks; after a retryable failure nothing is sent
before the backoff delay, but emitted events keep moving into the spool so memory stays bounded.
An event leaves the spool only once the collector answered for it: accepted or finally rejected.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from ingest.contract import now_ts
from ingest.sdk.config import SdkConfig
from ingest.sdk.counters import Counters
from ingest.sdk.outbox import Outbox
from ingest.sdk.retry import backoff_delay, is_retryable
from ingest.sdk.spool import Spool, SpoolBatch
from ingest.sdk.transport import HttpTransport, SendOutcome, build_body

log = logging.getLogger(__name__)

IDLE_WAIT_S = 5.0
"""Longest sleep with nothing to do; a safety net, wake-ups come through the outbox."""


@dataclass(frozen=True)
class Rejection:
    """An event the collector refused for good, with its reason code."""

    event_id: str | None
    reason: str
    field: str | None = None
    detail: str | None = None
    status: int | None = None


RejectionCallback = Callable[[list[Rejection]], None]


class Sender(threading.Thread):
    def __init__(
        self,
        config: SdkConfig,
        outbox: Outbox,
        counters: Counters,
        open_spool: Callable[[], Spool],
        on_rejected: RejectionCallback | None,
    ) -> None:
        super().__init__(name="rtrl-sdk-sender", daemon=True)
        self._config = config
        self._outbox = outbox
        self._counters = counters
        self._open_spool = open_spool
        self._on_rejected = on_rejected
        self.backlog = 0
        """Events in the spool, published for ``flush``."""
        self.flush_requested = threading.Event()
        self.stopping = threading.Event()
        self.opened = threading.Event()
        self._attempt = 0
        self._retry_at = 0.0
        self._last_send_at = 0.0

    def run(self) -> None:
        spool = self._open_spool()
        transport = HttpTransport(
            self._config.events_url,
            self._config.api_key,
            self._config.request_timeout_s,
            self._config.compress,
            f"{self._config.client_name}/{self._config.client_version}",
        )
        self.backlog = spool.size()
        self.opened.set()
        try:
            while not self.stopping.is_set():
                try:
                    self._step(spool, transport)
                except Exception:  # a dead sender loses everything after it: log and go on
                    log.exception("rtrl sdk sender: unexpected error; continuing")
                    time.sleep(0.5)
            self._pull(spool, 0.0)  # what is still in the outbox goes to the spool, not away
        finally:
            transport.close()
            spool.close()

    def _step(self, spool: Spool, transport: HttpTransport) -> None:
        self._pull(spool, self._wait_s(time.monotonic()))
        if self.backlog and self._due(time.monotonic()) and not self.stopping.is_set():
            self._send(spool, transport)

    def _due(self, now: float) -> bool:
        if now < self._retry_at:
            return False
        return (
            self.backlog >= self._config.batch_max_events
            or self.flush_requested.is_set()
            or now - self._last_send_at >= self._config.flush_interval_s
        )

    def _wait_s(self, now: float) -> float:
        if not self.backlog:
            return IDLE_WAIT_S
        if now < self._retry_at:
            return self._retry_at - now
        if self.flush_requested.is_set() or self.backlog >= self._config.batch_max_events:
            return 0.0
        return max(0.0, self._last_send_at + self._config.flush_interval_s - now)

    def _pull(self, spool: Spool, wait_s: float) -> None:
        """Move emitted events into the spool; wait up to ``wait_s`` for the first one."""
        events = self._outbox.take_all(wait_s)
        if events:
            dropped = spool.add(events)
            self._counters.add("spooled", len(events))
            self._counters.add("dropped", dropped)
            self.backlog = spool.size()
        self._outbox.settled()

    def _send(self, spool: Spool, transport: HttpTransport) -> None:
        batch = spool.next_batch(self._config.batch_max_events, self._config.batch_max_bytes)
        if not batch:
            self.backlog = 0
            return
        self._last_send_at = time.monotonic()
        outcome = transport.send(build_body(batch.events, now_ts()))
        if outcome.status is not None and 200 <= outcome.status < 300:
            self._settle(batch, outcome)
            spool.ack(batch, retry=False)
            self._attempt = 0
        elif is_retryable(outcome.status):
            spool.ack(batch, retry=True)
            self._attempt += 1
            delay = backoff_delay(self._attempt, outcome.retry_after_s)
            self._retry_at = time.monotonic() + delay
            self._counters.add("retried", len(batch))
            log.debug("rtrl sdk: %s; retrying %d events in %.2fs", outcome.error, len(batch), delay)
        else:
            self._report(
                [
                    Rejection(
                        _event_id(e), f"http_{outcome.status}", None, outcome.error, outcome.status
                    )
                    for e in batch.events
                ]
            )
            spool.ack(batch, retry=False)
            self._attempt = 0
        self.backlog = spool.size()

    def _settle(self, batch: SpoolBatch, outcome: SendOutcome) -> None:
        """Count what a 2xx answer accepted and report what it rejected, event by event."""
        results = outcome.results
        if results is None or len(results) != len(batch):
            self._counters.add("sent", len(batch))  # a 2xx without details accepts everything
            return
        rejected = [
            Rejection(
                r.get("event_id"),
                str(r.get("reason") or "rejected"),
                r.get("field"),
                r.get("detail"),
                r.get("status"),
            )
            for r in results
            if isinstance(r, dict) and not r.get("accepted")
        ]
        self._counters.add("sent", len(batch) - len(rejected))
        self._report(rejected)

    def _report(self, rejected: list[Rejection]) -> None:
        if not rejected:
            return
        self._counters.add("rejected", len(rejected))
        if self._on_rejected is None:
            log.warning(
                "rtrl sdk: collector rejected %d events, first: %s", len(rejected), rejected[0]
            )
            return
        try:
            self._on_rejected(rejected)
        except Exception:
            log.exception("rtrl sdk: on_rejected callback failed")


def _event_id(event: bytes) -> str | None:
    try:
        value = orjson.loads(event).get("event_id")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None
