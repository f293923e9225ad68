"""The JSON Schema (draft 2020-12) of an event, rendered from the same table the validator walks.

The checked-in ``event-v1.schema.json`` is for emitters in other languages and for plugin authors;
``rtrl schema export --check`` (run in CI) fails when it no longer matches the code.

Shape: the top level is the event as a client sends it (``received_at`` forbidden);
``$defs/collected_event`` is the event as stored on ``telemetry.events`` (``received_at``
required). Both refer to ``$defs/event``, the envelope, whose ``payload`` is chosen by ``type``
through one ``if``/``then`` per type. Two rules are beyond JSON Schema and live in the validator
only: impossible calendar dates such as Feb 30 (``format: date-time`` is not asserted by default),
the year bounds applied in UTC as well as as written (they differ only within a day of 2000-01-01
and 2100-12-31), and a tenant check against the API key. JSON Schema also counts ``1.0`` as an
integer; the validator does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ingest.contract.events import COLLECTOR_FIELD, ENVELOPE, PAYLOADS, REQUIRED

SCHEMA_PATH = Path(__file__).with_name("event-v1.schema.json")
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _payload_def(event_type: str) -> str:
    return f"{event_type}.payload"


def _payload_ref(event_type: str) -> str:
    return f"#/$defs/{_payload_def(event_type)}"


def build_schema() -> dict[str, Any]:
    """The schema as a dict (top level: an event from a client)."""
    properties = {name: field.json_schema() for name, field in ENVELOPE.items()}
    properties["payload"] = {"type": "object", "description": "per type; see allOf"}
    envelope = {
        "type": "object",
        "description": "envelope common to every event type",
        "properties": properties,
        "required": list(REQUIRED),
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"properties": {"type": {"const": event_type}}, "required": ["type"]},
                "then": {"properties": {"payload": {"$ref": _payload_ref(event_type)}}},
            }
            for event_type in PAYLOADS
        ],
    }
    defs: dict[str, Any] = {
        "event": envelope,
        "client_event": {
            "description": "as an emitter sends it: the collector sets received_at",
            "$ref": "#/$defs/event",
            "properties": {COLLECTOR_FIELD: False},
        },
        "collected_event": {
            "description": "as stored on telemetry.events: received_at set by the collector",
            "$ref": "#/$defs/event",
            "required": [COLLECTOR_FIELD],
        },
    }
    defs.update({_payload_def(name): record.json_schema() for name, record in PAYLOADS.items()})
    return {
        "$schema": DRAFT,
        "title": "rtrl telemetry event, version 1",
        "description": (
            "One telemetry event as an emitter sends it to the collector. "
            "$defs/collected_event is the form stored on telemetry.events."
        ),
        "$ref": "#/$defs/client_event",
        "$defs": defs,
    }


def render_schema() -> str:
    """Stable text: sorted keys, indent 2, trailing newline (diffs stay small and reviewable)."""
    return json.dumps(build_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def subschema(schema: dict[str, Any], definition: str) -> dict[str, Any]:
    """A schema that validates against one ``$defs`` entry (e.g. ``collected_event``)."""
    return {"$schema": DRAFT, "$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]}


def is_stale(path: Path = SCHEMA_PATH) -> bool:
    """Whether the file at ``path`` differs from what the code renders now."""
    try:
        return path.read_text(encoding="utf-8") != render_schema()
    except FileNotFoundError:
        return True


def write_schema(path: Path = SCHEMA_PATH) -> None:
    path.write_text(render_schema(), encoding="utf-8")
