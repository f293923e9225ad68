"""OpenAI's published OpenAPI schemas (``tests/serving/openai_schemas.json``, from
``openai/openai-openapi``; ``tests/serving/extract_openai_schemas.py`` makes it) and the check
every gateway answer passes: JSON Schema 2020-12, with two readings of the document, its OpenAPI
3.0 ``nullable: true`` read as "or null", and a streamed completion's chunk as
``CreateCompletionResponse`` with a null ``finish_reason`` allowed before the last chunk."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

HERE = Path(__file__).resolve().parent.parent / "serving"
URI = "urn:openai-openapi"
COMPLETION_CHUNK = "CreateCompletionResponse (a streamed chunk)"


def _or_null(node: Any) -> Any:
    """The document with each OpenAPI 3.0 ``nullable: true`` read as JSON Schema's "or null"."""
    if isinstance(node, list):
        return [_or_null(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _or_null(v) for k, v in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


def _schemas() -> dict[str, Any]:
    kept = json.loads((HERE / "openai_schemas.json").read_text())
    assert kept["source"]["repository"] == "https://github.com/openai/openai-openapi"
    schemas = _or_null(kept["components"]["schemas"])
    chunk = copy.deepcopy(schemas["CreateCompletionResponse"])
    reason = chunk["properties"]["choices"]["items"]["properties"]["finish_reason"]
    chunk["properties"]["choices"]["items"]["properties"]["finish_reason"] = {
        "anyOf": [reason, {"type": "null"}]
    }
    schemas[COMPLETION_CHUNK] = chunk
    return {"components": {"schemas": schemas}}


DOCUMENT = _schemas()
REGISTRY = Registry().with_resource(URI, DRAFT202012.create_resource(DOCUMENT))


def check(name: str, body: Any) -> None:
    """``body`` validates against the published schema ``name`` (every error listed)."""
    validator = Draft202012Validator(
        {"$ref": f"{URI}#/components/schemas/{name}"}, registry=REGISTRY
    )
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert not errors, f"{name}: {errors[:5]}"
