"""Every benchmark under ``bench/`` still imports: the suite does not run them (they are
measurements, not tests), so a module moved or renamed under them would otherwise be found
only by the next person who runs one. Importing runs no benchmark: each guards its work behind
``if __name__ == "__main__"``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
# Run in a virtualenv of their own (bench/requirements-quix.txt): only the project's names
# they import are checked here.
OWN_VENV = {"quix_join.py"}
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name not in OWN_VENV)
PROJECT = ("infra", "ingest", "rewards", "streams", "warehouse", "trainer", "models", "serving")


def test_the_benchmarks_are_found() -> None:
    assert len(SCRIPTS) > 20, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_benchmark_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert 'if __name__ == "__main__":' in script.read_text() or script.name.startswith("_")
    monkeypatch.syspath_prepend(str(BENCH))  # their own imports of bench/_common.py
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)


@pytest.mark.parametrize("name", sorted(OWN_VENV))
def test_the_project_names_a_benchmark_in_its_own_virtualenv_imports_exist(name: str) -> None:
    tree = ast.parse((BENCH / name).read_text())
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    ours = [n for n in found if n.module and n.module.split(".")[0] in PROJECT]
    assert ours, name
    for node in ours:
        module = importlib.import_module(str(node.module))
        for alias in node.names:
            assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
