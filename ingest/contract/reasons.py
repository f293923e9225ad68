"""Why an event was rejected, as a stable machine-readable code.

The codes travel with rejected bytes to ``telemetry.dlq`` and back to emitters in HTTP answers, so a
code once published is never renamed; new ones may be added.
"""

from __future__ import annotations

import enum

# Longest field path or detail kept in an error: a hostile key must not blow up a DLQ record.
_MAX_TEXT = 200


class Reason(enum.StrEnum):
    """One code per kind of contract violation."""

    not_json = "not_json"
    """The bytes are not one UTF-8 JSON document (includes NaN/Infinity and invalid UTF-8)."""
    not_object = "not_object"
    """The JSON document, or the event given, is not a JSON object."""
    too_large = "too_large"
    """The serialized event exceeds MAX_EVENT_BYTES (64 KiB)."""
    missing_field = "missing_field"
    """A required field is absent."""
    unknown_field = "unknown_field"
    """A field the contract does not define (at top level or inside payload/experiment/client)."""
    wrong_type = "wrong_type"
    """A field has the wrong JSON type (a boolean is never an integer, nor an integer a boolean)."""
    out_of_range = "out_of_range"
    """A value of the right type outside its allowed range, length, character set or choices."""
    bad_timestamp = "bad_timestamp"
    """A timestamp string that is not RFC 3339 with an offset, or is outside years 2000..2100."""
    unknown_type = "unknown_type"
    """The ``type`` string is not one of the event types of this schema version."""
    bad_schema_version = "bad_schema_version"
    """``schema_version`` is an integer other than the one this contract implements (1)."""
    forbidden_field = "forbidden_field"
    """A field this origin must not set: a client setting ``received_at``."""
    tenant_mismatch = "tenant_mismatch"
    """``org_id`` differs from the tenant of the API key that sent the event."""


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


class ContractError(ValueError):
    """An event broke the contract; ``reason`` says how and ``field`` where (dotted path).

    >>> err = ContractError(Reason.out_of_range, "payload.retained_fraction", "must be in [0, 1]")
    >>> err.to_dict()
    {'reason': 'out_of_range', 'field': 'payload.retained_fraction', 'detail': 'must be in [0, 1]'}
    >>> str(err)
    'out_of_range at payload.retained_fraction: must be in [0, 1]'
    """

    def __init__(self, reason: Reason, field: str | None, detail: str) -> None:
        self.reason = reason
        self.field = None if field is None else _clip(field)
        self.detail = _clip(detail)
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" at {self.field}" if self.field else ""
        return f"{self.reason}{where}: {self.detail}"

    def __reduce__(self) -> tuple[type[ContractError], tuple[Reason, str | None, str]]:
        # Keep the error picklable (multiprocessing, Faust workers) with its three attributes.
        return (type(self), (self.reason, self.field, self.detail))

    def to_dict(self) -> dict[str, str | None]:
        """The JSON-ready form used in DLQ records and HTTP error bodies."""
        return {"reason": str(self.reason), "field": self.field, "detail": self.detail}
