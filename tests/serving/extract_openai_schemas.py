"""Extract from OpenAI's published OpenAPI document the response schemas the gateway must
conform to, and everything they reference, into ``openai_schemas.json`` beside this file.

    python -m tests.serving.extract_openai_schemas PATH/TO/openai-openapi/openapi.json COMMIT

The tests read only the kept JSON (they run offline); rerun this to move to a newer document.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOTS = (
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "ListModelsResponse",
    "ErrorResponse",
    "Model",
)
REF = "#/components/schemas/"
KEPT = Path(__file__).with_name("openai_schemas.json")


def references(node: Any) -> set[str]:
    """The names of the component schemas ``node`` refers to directly.

    >>> sorted(references({"a": {"$ref": "#/components/schemas/X"}, "b": [{"$ref": REF + "Y"}]}))
    ['X', 'Y']
    """
    if isinstance(node, dict):
        found = {node["$ref"][len(REF) :]} if str(node.get("$ref", "")).startswith(REF) else set()
        return found.union(*(references(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(references(v) for v in node))
    return set()


def closure(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    """``roots`` and every schema they reference, transitively, sorted by name."""
    kept: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in kept:
            kept[name] = schemas[name]
            todo.extend(references(schemas[name]))
    return dict(sorted(kept.items()))


def main(document: str, commit: str) -> None:
    spec = json.loads(Path(document).read_text())
    kept = {
        "source": {
            "repository": "https://github.com/openai/openai-openapi",
            "file": "openapi.json",
            "commit": commit,
            "openapi": spec["openapi"],
            "roots": list(ROOTS),
        },
        "components": {"schemas": closure(spec["components"]["schemas"], ROOTS)},
    }
    KEPT.write_text(json.dumps(kept, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
