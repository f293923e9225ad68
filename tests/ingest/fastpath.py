"""Shared by the fast-path tests: compare ``parse_event`` with ``parse_event_reference``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from ingest.contract.events import COLLECTOR_FIELD
from ingest.contract.reasons import ContractError
from ingest.contract.validate import Origin, parse_event, parse_event_reference

GOLDEN = Path(__file__).parents[1] / "golden" / "events"
VALID_FILES = sorted((GOLDEN / "valid").glob("*.json"))
INVALID_FILES = sorted((GOLDEN / "invalid").glob("*.json"))
EXAMPLES = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Raw = bytes | bytearray | memoryview | str


def typed(value: object) -> object:
    """A value with its type at every level and dict keys in order, for exact comparison."""
    if isinstance(value, dict):
        return (dict, [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return (list, [typed(item) for item in value])
    return (type(value), value)


def outcome(parse: Any, raw: Raw, origin: Origin, tenant: str | None) -> tuple[object, ...]:
    try:
        return ("ok", typed(parse(raw, origin=origin, tenant=tenant)))
    except ContractError as error:
        return ("error", type(error.reason), error.reason, error.field, error.detail)


def assert_same(raw: Raw, origin: Origin, tenant: str | None = None) -> tuple[object, ...]:
    """Fast and reference agree on ``raw``; returns the verdict."""
    reference = outcome(parse_event_reference, raw, origin, tenant)
    assert outcome(parse_event, raw, origin, tenant) == reference
    return reference


def golden_event(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def as_client(event: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in event.items() if name != COLLECTOR_FIELD}
