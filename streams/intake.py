"""What the worker makes of one message of ``telemetry.events``: a valid event, or a DLQ entry.

A record that is not a valid collected event (events-v1) never stops the worker: it goes to
``telemetry.dlq`` as its original bytes, unchanged, with the reason in headers (so that bytes that
are not even UTF-8 survive intact). One reason is the stream's own: ``key_mismatch``, an event whose
message key is not its ``interaction_id`` (it may sit on another partition than its siblings, and
its interaction would be split in two).
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.contract import ContractError, Origin, parse_event
from streams.processor import Incoming

KEY_MISMATCH = "key_mismatch"


@dataclass(frozen=True, slots=True)
class Rejected:
    raw: bytes
    reason: str
    field: str | None
    detail: str

    def headers(self, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
        """DLQ headers: why, and where the bytes came from."""
        return [
            ("rtrl.reason", self.reason.encode()),
            ("rtrl.field", (self.field or "").encode()),
            ("rtrl.detail", self.detail.encode()),
            ("rtrl.stage", b"stream"),
            ("rtrl.source", f"{topic}/{partition}/{offset}".encode()),
        ]


def read_message(key: bytes | None, value: bytes | None) -> Incoming | Rejected:
    """Validate one message.

    >>> read_message(b"i", b"{oops").reason
    'not_json'
    >>> read_message(b"i", b'{"event_id": "e"}').reason
    'missing_field'
    """
    raw = value or b""
    try:
        event = parse_event(raw, origin=Origin.collected)
    except ContractError as exc:
        return Rejected(raw, str(exc.reason), exc.field, exc.detail)
    if key is not None and key != str(event["interaction_id"]).encode():
        return Rejected(raw, KEY_MISMATCH, None, "the message key is not the interaction_id")
    return Incoming(event, raw)
