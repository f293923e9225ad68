"""The project's own Python modules, as pyproject.toml's package list names them: for the
tests that read the code itself (import floors, house rules)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
_FIND = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
PACKAGES = sorted(p.rstrip("*") for p in _FIND["find"]["include"])


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found
