"""`rtrl --help` and every stage's subcommands load no model library: the torch-free services
image runs the same console script."""

from __future__ import annotations

import subprocess
import sys


def test_building_the_cli_loads_neither_torch_nor_transformers():
    code = (
        "import sys, rtrl.cli; rtrl.cli.build_parser(); "
        "print([m for m in ('torch', 'accelerate', 'transformers', 'peft') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
