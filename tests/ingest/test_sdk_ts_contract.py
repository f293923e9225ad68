"""The TypeScript contract against the Python one, case by case: the golden events and a few
hundred mutations of them (each field removed, retyped, stretched, renamed) must get the same
verdict, reason and field from both."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson

from ingest.contract import ContractError, Origin, parse_event
from tests.ingest.sdk_ts import SDK_TS, node

GOLDEN = Path(__file__).parents[1] / "golden" / "events"
VERDICTS = Path(__file__).parents[1] / "fixtures" / "sdk_ts_verdicts.mjs"
REPLACEMENTS: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    2**53,
    "",
    "x" * 129,
    "a@b",
    "\u0007",
    "2026-02-30T00:00:00Z",
    [],
    {},
    {"extra": 1},
]


def mutations(event: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for path in [(k,) for k in event] + [("payload", k) for k in event["payload"]]:
        parent = event if len(path) == 1 else event["payload"]
        name = path[-1]
        removed = copy.deepcopy(event)
        (removed if len(path) == 1 else removed["payload"]).pop(name)
        out.append(removed)
        for value in REPLACEMENTS:
            changed = copy.deepcopy(event)
            (changed if len(path) == 1 else changed["payload"])[name] = value
            out.append(changed)
        renamed = copy.deepcopy(event)
        target = renamed if len(path) == 1 else renamed["payload"]
        target[name + "_x"] = target.pop(name)
        out.append(renamed)
        assert name in parent
    return out


def python_verdict(raw: bytes, origin: str, tenant: str | None) -> dict[str, Any]:
    try:
        parse_event(raw, origin=Origin(origin), tenant=tenant)
    except ContractError as err:
        return {"reason": str(err.reason), "field": err.field}
    return {"reason": None, "field": None}


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((GOLDEN / "valid").glob("*.json")):
        event = json.loads(path.read_text(encoding="utf-8"))
        for origin in ("collected", "client"):
            for mutated in [event, *mutations(event)]:
                out.append(
                    {
                        "raw": orjson.dumps(mutated).decode(),
                        "origin": origin,
                        "tenant": "acme-robotics" if origin == "client" else None,
                    }
                )
    for path in sorted((GOLDEN / "invalid").glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        raw = case["raw"] if "raw" in case else orjson.dumps(case["event"]).decode()
        raw += " " * (case.get("pad_to_bytes", 0) - len(raw.encode()))
        out.append(
            {"raw": raw, "origin": case.get("origin", "client"), "tenant": case.get("tenant")}
        )
    return out


def test_typescript_and_python_contracts_give_the_same_verdicts() -> None:
    todo = cases()
    answer = node(
        str(VERDICTS), cwd=SDK_TS, timeout=120, stdin="".join(json.dumps(c) + "\n" for c in todo)
    )
    assert answer.returncode == 0, answer.stderr
    ts = [json.loads(line) for line in answer.stdout.splitlines()]
    assert len(ts) == len(todo) > 2000
    py = [python_verdict(c["raw"].encode(), c["origin"], c["tenant"]) for c in todo]
    differ = [
        (c["raw"][:160], c["origin"], p, t) for c, p, t in zip(todo, py, ts, strict=True) if p != t
    ]
    assert not differ, f"{len(differ)} differ, first: {differ[:3]}"
    # The corpus exercises both answers and most reasons, so agreement says something.
    assert {p["reason"] for p in py} >= {
        None,
        "missing_field",
        "unknown_field",
        "wrong_type",
        "out_of_range",
        "bad_timestamp",
        "forbidden_field",
    }
