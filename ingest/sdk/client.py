"""What an editor plugin calls: ``emit`` validates and enqueues, and never blocks or raises.

Every outcome of ``emit`` is an answer (``EmitResult``) and a counter, never an exception in the
editor's thread. Sending happens on a background thread (``sender``) that survives ``fork``: the
child notices the new pid on its next call and starts its own sender (with an empty memory spool,
or the same spool file, whose backlog it then shares with the parent).
"""

from __future__ import annotations

import atexit
import enum
import logging
import os
import threading
import time
import weakref
import zlib
from collections.abc import Mapping
from typing import Any

import orjson

from ingest.contract import Origin, now_ts, uuid7, validate_event
from ingest.sdk.config import SdkConfig
from ingest.sdk.counters import Counters, CounterSnapshot
from ingest.sdk.disk_spool import SqliteSpool
from ingest.sdk.outbox import Outbox
from ingest.sdk.sender import RejectionCallback, Sender
from ingest.sdk.spool import MemorySpool, Spool

log = logging.getLogger(__name__)

FLUSH_POLL_S = 0.01


class EmitResult(enum.StrEnum):
    queued = "queued"
    invalid = "invalid"
    """The event broke the contract (logged at debug level with the reason)."""
    queue_full = "queue_full"
    sampled_out = "sampled_out"
    closed = "closed"


def keeps_interaction(interaction_id: str, sample_rate: float) -> bool:
    """Sampling by interaction, so the stream sees all of an interaction's events or none.

    >>> keeps_interaction("i-1", 1.0), keeps_interaction("i-1", 0.0)
    (True, False)
    >>> sum(keeps_interaction(f"i-{n}", 0.25) for n in range(10_000)) // 100
    25
    """
    if sample_rate >= 1.0:
        return True
    return zlib.crc32(interaction_id.encode()) < sample_rate * 2**32


def _compact(data: bytes) -> bytes:
    """A right-sized copy: orjson's result keeps a 4 KiB allocation whatever its length, so
    holding 100k of them in a queue or memory spool would cost 400 MB instead of 40."""
    return bytes(memoryview(data))


class Client:
    """The SDK's entry point; one per plugin process (``fork`` is handled).

    ``on_rejected`` is called on the sender thread with the events the collector refused.
    """

    def __init__(self, config: SdkConfig, on_rejected: RejectionCallback | None = None) -> None:
        self.config = config
        self.privacy_mode = config.privacy_mode
        """Settable at run time: the user may opt out in the middle of a session."""
        self._on_rejected = on_rejected
        self._counters = Counters()
        self._closed = False
        self._start()
        _live_clients.add(self)
        if config.close_on_exit_s > 0:
            atexit.register(self._close_at_exit)

    # -- the editor's side -------------------------------------------------------------------

    def emit(
        self,
        event_type: str,
        interaction_id: str,
        payload: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> EmitResult:
        """Validate one event and hand it to the sender; returns at once.

        ``fields`` are the other envelope fields (``session_id``, ``user_id``, ``checkpoint_id``,
        ``event_id``, ``ts``, ``experiment``, ...); ``org_id`` defaults to the config's,
        ``event_id`` to a new UUIDv7, ``ts`` to now.
        """
        try:
            return self._emit(event_type, interaction_id, payload, fields)
        except Exception:  # never into the editor's thread
            log.debug("rtrl sdk: emit failed", exc_info=True)
            self._counters.add("invalid")
            return EmitResult.invalid

    def _emit(
        self,
        event_type: str,
        interaction_id: str,
        payload: Mapping[str, Any] | None,
        fields: dict[str, Any],
    ) -> EmitResult:
        if self._closed:
            return EmitResult.closed
        self._ensure_sender()
        if not keeps_interaction(str(interaction_id), self.config.sample_rate):
            self._counters.add("sampled_out")
            return EmitResult.sampled_out
        raw: dict[str, Any] = {
            "event_id": fields.pop("event_id", None) or uuid7(),
            "type": event_type,
            "schema_version": 1,
            "ts": fields.pop("ts", None) or now_ts(),
            "interaction_id": interaction_id,
            "org_id": self.config.org_id,
            "client": {"name": self.config.client_name, "version": self.config.client_version},
            "payload": {} if payload is None else dict(payload),
        }
        raw.update(fields)
        raw.pop("sent_at", None)  # set by the sender at send time
        if self.privacy_mode:
            raw["privacy_mode"] = True
        try:
            event = validate_event(raw, origin=Origin.client)
        except ValueError as err:
            log.debug("rtrl sdk: invalid event: %s", err)
            self._counters.add("invalid")
            return EmitResult.invalid
        if not self._outbox.put(_compact(orjson.dumps(event))):
            self._counters.add("dropped")
            return EmitResult.queue_full
        self._counters.add("queued")
        return EmitResult.queued

    def counters(self) -> CounterSnapshot:
        return self._counters.snapshot()

    # -- deadlines ---------------------------------------------------------------------------

    def flush(self, timeout: float) -> int:
        """Send everything emitted so far; wait at most ``timeout`` seconds.

        Returns how many events are still undelivered (0: all answered by the collector). Those
        stay in the spool; a flush never drops anything.
        """
        deadline = time.monotonic() + timeout
        self._ensure_sender()
        sender = self._sender
        sender.flush_requested.set()
        self._outbox.wake()
        try:
            while time.monotonic() < deadline and (
                not sender.opened.is_set() or self._pending(sender)
            ):
                time.sleep(FLUSH_POLL_S)
        finally:
            sender.flush_requested.clear()
        return self._pending(sender)

    def close(self, timeout: float) -> int:
        """Flush, then stop the sender, all within ``timeout`` seconds.

        Returns how many events were not delivered: kept on disk with a spool file (the next
        process sends them), otherwise lost and counted as dropped.
        """
        if self._closed:
            return 0
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        self._closed = True
        atexit.unregister(self._close_at_exit)
        sender = self._sender
        sender.stopping.set()
        self._outbox.wake()
        sender.join(max(0.0, deadline - time.monotonic()))
        left = self._pending(sender)
        if left and self.config.spool_path is None:
            self._counters.add("dropped", left)
        if left:
            log.warning(
                "rtrl sdk: closing with %d undelivered events (%s)",
                left,
                "kept in the spool file" if self.config.spool_path else "dropped",
            )
        _live_clients.discard(self)
        return left

    def _close_at_exit(self) -> None:
        if not self._closed and self._pid == os.getpid():
            self.close(self.config.close_on_exit_s)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close(self.config.request_timeout_s)

    # -- internals ---------------------------------------------------------------------------

    def _start(self) -> None:
        self._pid = os.getpid()
        self._outbox = Outbox(self.config.queue_max_events)
        self._sender = Sender(
            self.config, self._outbox, self._counters, self._open_spool, self._on_rejected
        )
        self._sender.start()

    def _open_spool(self) -> Spool:
        c = self.config
        if c.spool_path is not None:
            try:
                return SqliteSpool(c.spool_path, c.spool_max_events, c.spool_max_bytes)
            except Exception:  # unwritable path, corrupt file: degrade, do not go silent
                log.exception(
                    "rtrl sdk: cannot open spool %s; keeping events in memory", c.spool_path
                )
        return MemorySpool(c.spool_max_events, c.spool_max_bytes)

    def _ensure_sender(self) -> None:
        """In a forked child the parent's sender thread does not exist. The parent keeps
        delivering what it queued; the child starts afresh with its own queue and sender."""
        if self._pid != os.getpid():
            with _restart_lock:
                if self._pid != os.getpid():  # another thread of the child may have been first
                    self._start()

    def _pending(self, sender: Sender) -> int:
        return self._outbox.pending() + sender.backlog


_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()
_restart_lock = threading.Lock()


def _locks_after_fork() -> None:
    # A lock held by another thread at fork time would never be released in the child.
    global _restart_lock
    _restart_lock = threading.Lock()
    for client in list(_live_clients):
        client._counters.reset_lock()


os.register_at_fork(after_in_child=_locks_after_fork)
