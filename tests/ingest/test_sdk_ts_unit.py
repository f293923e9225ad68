"""The TypeScript SDK's own suite (node's test runner: unit tests on an HTTP stub of the
collector, and the golden events as its conformance suite), its contract kept generated from the
JSON Schema, and the package as a plugin gets it: ESM, CommonJS, types, no runtime dependency,
and an example VS Code extension that compiles against it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.ingest.sdk_ts import SDK_TS, node, npm

SCHEMA = SDK_TS.parent / "contract" / "event-v1.schema.json"


def test_typescript_unit_and_golden_tests_pass() -> None:
    result = npm("test")
    summary = dict(re.findall(r"^# (pass|fail) (\d+)$", result.stdout, re.MULTILINE))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert summary.get("fail") == "0"
    golden = len(list((SDK_TS.parents[1] / "tests" / "golden" / "events").glob("*/*.json")))
    assert int(summary["pass"]) >= golden + 20  # one per golden file, and the unit tests


def test_the_contract_table_is_generated_from_the_json_schema(tmp_path: Path) -> None:
    assert node("scripts/gen-contract.mjs", "--check").returncode == 0
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    schema["$defs"]["event"]["properties"]["event_id"]["maxLength"] = 63  # the schema moves on
    changed = tmp_path / "schema.json"
    changed.write_text(json.dumps(schema), encoding="utf-8")
    stale = node("scripts/gen-contract.mjs", "--check", "--schema", str(changed))
    assert stale.returncode == 1 and "stale" in stale.stderr


def test_the_package_serves_import_require_and_types_without_runtime_dependencies() -> None:
    package = json.loads((SDK_TS / "package.json").read_text(encoding="utf-8"))
    assert package["name"] == "@rtrl/sdk"
    assert not package.get("dependencies")
    for condition in ("import", "require"):
        entry = package["exports"]["."][condition]
        assert (SDK_TS / entry["types"]).is_file() and (SDK_TS / entry["default"]).is_file()
    check = (
        "const {Client, validateEvent} = %s; "
        "const c = new Client({endpoint: 'http://127.0.0.1:9', apiKey: 'k', orgId: 'o', "
        "closeOnExitMs: 0, logger: {debug() {}, warn() {}}}); "
        "console.log(c.emit('edit.accepted', 'i', {edit_id: 'e'}, "
        "{sessionId: 's', userId: 'u', checkpointId: 'c'}), typeof validateEvent); "
        "c.close(10).then(() => process.exit(0));"
    )
    cjs = node("-e", check % "require('@rtrl/sdk')", cwd=SDK_TS / "examples" / "vscode-extension")
    esm = node(
        "--input-type=module",
        "-e",
        check % "await import('@rtrl/sdk')",
        cwd=SDK_TS / "examples" / "vscode-extension",
    )
    assert cjs.stdout.split() == esm.stdout.split() == ["queued", "function"], (
        cjs.stderr + esm.stderr
    )
    packed = npm("pack", "--dry-run", "--json")
    assert packed.returncode == 0, packed.stderr
    files = {f["path"] for f in json.loads(packed.stdout)[0]["files"]}
    assert "dist/esm/index.js" in files and "dist/cjs/index.d.ts" in files
    assert all(f.startswith("dist/") or f == "package.json" for f in files), files


def test_the_example_vscode_extension_compiles_against_the_package() -> None:
    example = SDK_TS / "examples" / "vscode-extension"
    shutil.rmtree(example / "out", ignore_errors=True)
    built = npm("run", "build", cwd=example)
    assert built.returncode == 0, built.stdout + built.stderr
    assert 'require("@rtrl/sdk")' in (example / "out" / "extension.js").read_text()
