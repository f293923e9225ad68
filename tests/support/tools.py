"""Two small tools whose arguments a model can get wrong in every way the gateway reads
(a string too long, an integer out of range, a missing or extra field), the ask that offers
them, and a ``tool_choice`` naming one: for the tool-call tests of the gateway and its upstream."""

from __future__ import annotations

from typing import Any

TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "maxLength": 12}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "parameters": {
                "type": "object",
                "properties": {"only": {"type": "integer", "minimum": 0, "maximum": 9}},
                "required": ["only"],
                "additionalProperties": False,
            },
        },
    },
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK: Any = [{"role": "user", "content": "Fix the failing test."}]
NAMED: Any = {"type": "function", "function": {"name": "run_tests"}}
