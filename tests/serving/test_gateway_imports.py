"""A gateway in front of an upstream loads no ML framework: it only reads the registry and
forwards requests, so importing it must not pull in torch, transformers, numpy, polars or
pyarrow (they cost seconds of start-up and over half a gigabyte of memory per replica)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "peft", "numpy", "polars", "pyarrow", "duckdb")


def test_the_upstream_gateway_imports_no_ml_framework() -> None:
    probe = (
        "import sys, rtrl.cli, serving.server, serving.backends.upstream, llamacpp.cli, "
        "serving.fast_path; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
