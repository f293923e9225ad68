"""The checked-in JSON Schema is current and well-formed; `rtrl schema` export and validate work."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jsonschema
import pytest

from ingest import cli
from ingest.contract import EVENT_TYPES
from ingest.contract.schema import SCHEMA_PATH, build_schema, render_schema

GOLDEN = Path(__file__).parents[1] / "golden" / "events"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rtrl")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_checked_in_schema_is_not_stale() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_schema(), (
        "run `rtrl schema export` and commit the result"
    )


def test_schema_is_valid_draft_2020_12_and_closed_everywhere() -> None:
    schema = build_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    objects = [d for d in schema["$defs"].values() if d.get("type") == "object"]
    assert len(objects) == len(EVENT_TYPES) + 1  # one payload per type, and the envelope
    assert all(d["additionalProperties"] is False for d in objects)
    envelope = schema["$defs"]["event"]["properties"]
    for nested in ("experiment", "client"):
        assert envelope[nested]["additionalProperties"] is False


def test_rendering_is_stable() -> None:
    text = render_schema()
    assert text == render_schema() and text.endswith("}\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_export_writes_and_check_detects_staleness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "event.schema.json"
    assert run(["schema", "export", "--out", str(out), "--check"]) == 1  # missing
    assert run(["schema", "export", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == SCHEMA_PATH.read_text(encoding="utf-8")
    assert run(["schema", "export", "--out", str(out), "--check"]) == 0
    out.write_text(out.read_text(encoding="utf-8").replace("128", "256"), encoding="utf-8")
    assert run(["schema", "export", "--out", str(out), "--check"]) == 1
    assert "stale" in capsys.readouterr().err


def test_validate_reports_each_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = json.loads((GOLDEN / "valid" / "edit.accepted.json").read_text(encoding="utf-8"))
    del good["received_at"]
    bad = {**good, "payload": {"edit_id": "e-1", "lines": 3}}
    lines = [json.dumps(good), "", json.dumps(bad), "not json", json.dumps(good)]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    assert run(["schema", "validate", str(path)]) == 1
    captured = capsys.readouterr()
    rows = [line.split("\t") for line in captured.out.splitlines()]
    assert [row[:3] for row in rows] == [
        ["3", "unknown_field", "payload.lines"],
        ["4", "not_json", "-"],
    ]
    assert "2 valid, 2 invalid" in captured.err


def test_validate_origin_collected_and_all_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.jsonl"
    events = [
        json.loads(p.read_text(encoding="utf-8")) for p in sorted((GOLDEN / "valid").iterdir())
    ]
    path.write_text("".join(json.dumps(e) + "\r\n" for e in events), encoding="utf-8")
    assert run(["schema", "validate", "--origin", "collected", str(path)]) == 0
    assert run(["schema", "validate", str(path)]) == 1  # clients never set received_at
    assert capsys.readouterr().out.count("forbidden_field") == len(events)
