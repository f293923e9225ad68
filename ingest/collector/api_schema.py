"""What the OpenAPI document says about ``POST /v1/events``: bodies in, answers out.

The request body is read raw (gzip, size limits, one bad event must not fail the others), so its
schema is declared here by hand; the answers are pydantic models.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ingest.contract.schema import build_schema

_DEFS_REF = "#/$defs/"
_COMPONENTS_REF = "#/components/schemas/"


class EventResult(BaseModel):
    index: int = Field(description="position of the event in the request")
    event_id: str | None = Field(description="the event's event_id, when it had a string one")
    accepted: bool
    status: int = Field(description="202 accepted, 400 invalid, 403 org_id not the key's tenant")
    reason: str | None = Field(None, description="reason code of a rejection (ingest.contract)")
    field: str | None = Field(None, description="dotted path of the offending field")
    detail: str | None = None


class BatchAnswer(BaseModel):
    accepted: int
    rejected: int
    results: list[EventResult] = Field(description="one per event, in the request's order")


class ErrorAnswer(BaseModel):
    """Every refusal's body, whatever its status (``ingest.collector.errors``)."""

    reason: str = Field(description="machine-readable code of why the request was refused")
    detail: str
    request_id: str = Field(description="the request's id, also in its X-Request-ID header")


class Health(BaseModel):
    status: str
    kafka: str


class Live(BaseModel):
    status: str


def event_components() -> dict[str, Any]:
    """The contract's own JSON Schema (``ingest.contract.schema``) as OpenAPI components: its
    ``$defs`` become ``components/schemas`` and their references follow. Its per-type
    ``if``/``then`` rules become the equivalent ``oneOf`` (one branch per ``type`` constant),
    which OpenAPI tools, schemathesis among them, can generate from."""

    def move(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (
                    _COMPONENTS_REF + v[len(_DEFS_REF) :]
                    if k == "$ref" and isinstance(v, str) and v.startswith(_DEFS_REF)
                    else move(v)
                )
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [move(v) for v in node]
        return node

    defs = move(build_schema()["$defs"])
    defs["event"] = _if_then_as_one_of(defs["event"])
    return defs


def _if_then_as_one_of(schema: dict[str, Any]) -> dict[str, Any]:
    """``allOf: [{if: A, then: B}, ...]`` where the ``if``s exclude each other and cover every
    allowed value -> ``oneOf: [A and B, ...]``.

    >>> _if_then_as_one_of({"allOf": [{"if": {"properties": {"type": {"const": "x"}},
    ...     "required": ["type"]}, "then": {"properties": {"payload": {"type": "object"}}}}]})
    {'oneOf': [{'properties': {'type': {'const': 'x'}, 'payload': {'type': 'object'}}, \
'required': ['type']}]}
    """
    rules = schema.get("allOf", [])
    if not rules or not all(set(rule) == {"if", "then"} for rule in rules):
        return schema
    branches = [
        {
            "properties": {
                **rule["if"].get("properties", {}),
                **rule["then"].get("properties", {}),
            },
            "required": rule["if"].get("required", []),
        }
        for rule in rules
    ]
    rest = {k: v for k, v in schema.items() if k != "allOf"}
    return {**rest, "oneOf": branches}


def request_body_schema(max_events: int) -> dict[str, Any]:
    event = {"$ref": _COMPONENTS_REF + "client_event"}
    return {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["events"],
                    "properties": {
                        "events": {"type": "array", "items": event, "maxItems": max_events}
                    },
                }
            }
        },
        "description": "a batch of events; the body may be gzip (Content-Encoding: gzip)",
    }


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    why = {
        400: 'malformed body (not JSON, nested too deep, not {"events": [...]}, bad gzip)',
        401: "missing or unknown API key",
        413: "body or batch too large",
        415: "unsupported Content-Encoding",
        429: "too many requests for this key; see Retry-After",
        503: "Kafka unavailable or producer queue full; nothing was accepted, see Retry-After",
    }
    return {s: {"model": ErrorAnswer, "description": why[s]} for s in statuses}
