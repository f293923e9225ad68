"""The telemetry event contract, version 1: what an event is, checked strictly.

Every stage that reads or writes events imports it from here: emitters validate before sending,
the collector on arrival, the stream and the replay on every record they consume.
"""

from ingest.contract.events import EVENT_TYPES, MAX_EVENT_BYTES, SCHEMA_VERSION
from ingest.contract.ids import uuid7
from ingest.contract.reasons import ContractError, Reason
from ingest.contract.timestamps import format_ts, normalize_ts, now_ts, parse_ts
from ingest.contract.validate import Origin, check_tenant, parse_event, validate_event

__all__ = [
    "EVENT_TYPES",
    "MAX_EVENT_BYTES",
    "SCHEMA_VERSION",
    "ContractError",
    "Origin",
    "Reason",
    "check_tenant",
    "format_ts",
    "normalize_ts",
    "now_ts",
    "parse_event",
    "parse_ts",
    "uuid7",
    "validate_event",
]
