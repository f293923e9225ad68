"""Golden events: every valid one passes, every invalid one fails with its reason, and the exported
JSON Schema gives the same verdict as the validator on all of them.

Invalid files: ``{"reason", "field", "origin", "event" | "raw", ...}``; ``pad_to_bytes`` pads the
serialized event with spaces to that size; ``tenant`` is the API key's tenant; ``schema_blind``
says why JSON Schema cannot see the problem.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from ingest.contract import EVENT_TYPES, ContractError, Origin, Reason, parse_event, validate_event
from ingest.contract.schema import SCHEMA_PATH, subschema

GOLDEN = Path(__file__).parents[1] / "golden" / "events"
VALID_FILES = sorted((GOLDEN / "valid").glob("*.json"))
INVALID_FILES = sorted((GOLDEN / "invalid").glob("*.json"))


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def without_received_at(event: dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event.pop("received_at", None)
    return event


def raw_bytes(case: dict[str, Any]) -> bytes:
    """The bytes an invalid case stands for."""
    if "raw" in case:
        return case["raw"].encode("utf-8")
    raw = orjson.dumps(case["event"])
    if "pad_to_bytes" in case:
        raw += b" " * (case["pad_to_bytes"] - len(raw))
    return raw


@cache
def schema_validators() -> dict[Origin, jsonschema.Draft202012Validator]:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return {
        Origin.client: jsonschema.Draft202012Validator(schema),
        Origin.collected: jsonschema.Draft202012Validator(subschema(schema, "collected_event")),
    }


def test_golden_sets_are_complete() -> None:
    types = {load(path)["type"] for path in VALID_FILES}
    assert types == set(EVENT_TYPES)
    assert {path.stem for path in VALID_FILES} >= set(EVENT_TYPES)  # one <type>.json each
    assert len(INVALID_FILES) >= 25
    assert {load(path)["reason"] for path in INVALID_FILES} == set(Reason)


def test_golden_valid_events_use_every_optional_field() -> None:
    events = [load(path) for path in VALID_FILES]
    for optional in ("experiment", "client", "privacy_mode", "sent_at"):
        assert any(optional in event for event in events), optional
    assert any(event.get("privacy_mode") is True for event in events)
    assert any(not ({"experiment", "client", "sent_at"} & event.keys()) for event in events)


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda path: path.stem)
def test_valid_event_passes_as_collected_and_as_client(path: Path) -> None:
    event = load(path)
    collected = parse_event(path.read_bytes(), origin=Origin.collected)
    client = validate_event(without_received_at(event), origin=Origin.client)

    assert collected.keys() == event.keys()
    assert client.keys() == event.keys() - {"received_at"}
    payload, ts = collected["payload"], collected["ts"]
    assert isinstance(payload, dict) and isinstance(ts, str)
    assert payload.keys() == event["payload"].keys()
    # Normalized once, stable thereafter.
    assert validate_event(collected, origin=Origin.collected) == collected
    assert ts.endswith("Z") and len(ts) == 27


@pytest.mark.parametrize("path", INVALID_FILES, ids=lambda path: path.stem)
def test_invalid_event_fails_with_its_reason(path: Path) -> None:
    case = load(path)
    origin = Origin(case.get("origin", "client"))
    tenant = case.get("tenant")

    with pytest.raises(ContractError) as caught:
        parse_event(raw_bytes(case), origin=origin, tenant=tenant)
    assert caught.value.reason == Reason(case["reason"])
    assert caught.value.field == case.get("field")

    if "event" in case and "pad_to_bytes" not in case:
        # The same verdict when the event comes already parsed (as in the SDK).
        with pytest.raises(ContractError) as again:
            validate_event(case["event"], origin=origin, tenant=tenant)
        assert again.value.to_dict() == caught.value.to_dict()


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda path: path.stem)
def test_schema_accepts_valid_golden_events(path: Path) -> None:
    event = load(path)
    validators = schema_validators()
    validators[Origin.collected].validate(event)
    validators[Origin.client].validate(without_received_at(event))
    assert not validators[Origin.client].is_valid(event)  # a client never sets received_at


STRUCTURAL = [
    path
    for path in INVALID_FILES
    if "event" in load(path)
    and "pad_to_bytes" not in load(path)
    and "schema_blind" not in load(path)
]


@pytest.mark.parametrize("path", STRUCTURAL, ids=lambda path: path.stem)
def test_schema_rejects_structurally_invalid_golden_events(path: Path) -> None:
    case = load(path)
    validator = schema_validators()[Origin(case["origin"])]
    assert not validator.is_valid(case["event"])


def test_schema_blind_cases_are_few_and_explained() -> None:
    blind = [load(path) for path in INVALID_FILES if "schema_blind" in load(path)]
    assert len(blind) <= 3
    assert all(len(case["schema_blind"]) > 20 for case in blind)
    for case in blind:  # and the schema really does accept them
        if case["reason"] != "tenant_mismatch":
            assert schema_validators()[Origin(case["origin"])].is_valid(case["event"])
