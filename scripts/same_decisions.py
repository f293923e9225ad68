#!/usr/bin/env python3
"""Do two checkouts take the same decisions on the same files? For a refactor that must not
change behaviour: every gate evidence file, canary evidence file and checkpoint registry found
under a folder is re-evaluated by each checkout's own `rtrl` (its `.venv`), and the exit codes
and outputs are compared.

    scripts/same_decisions.py --old /tmp/base --new . --files /tmp/evidence

The commands: `rtrl gate evaluate --evidence F --json` for each gate evidence file (JSON lines
or Parquet), `rtrl canary evaluate --evidence F --json` for each canary evidence file,
`rtrl checkpoints list --registry R --json` for each registry, and for each of its checkpoints
with stored evidence `rtrl gate evaluate --checkpoint ID --registry R --json` (and `rtrl canary
evaluate --checkpoint` for a canary's). Prints one line per command and exits 1 on any
difference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def _kind(path: Path) -> str | None:
    """``gate``, ``canary`` or None, read from the file's first line or its columns."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        names = set(pq.read_schema(path).names)
        return "gate" if {"reward", "behaviour_logprob"} <= names else None
    try:
        first = path.read_text().splitlines()[0]
        head = json.loads(first)
    except (UnicodeDecodeError, IndexError, ValueError):
        return None
    if not isinstance(head, dict):
        return None
    if head.get("kind") == "rtrl.canary-evidence":
        return "canary"
    return "gate" if "reward" in head and "user_id" in head else None


def commands(files: Path) -> list[list[str]]:
    found: list[list[str]] = []
    for path in sorted(files.rglob("*")):
        if path.is_file() and path.suffix in (".jsonl", ".parquet", ".json"):
            kind = _kind(path)
            if kind is not None:
                found.append([kind, "evaluate", "--evidence", str(path), "--json"])
    for registry in sorted({p.parent.parent for p in files.rglob("checkpoint.json")}):
        found.append(["checkpoints", "list", "--registry", str(registry), "--json"])
        for record in sorted(registry.glob("*/checkpoint.json")):
            info = json.loads(record.read_text())
            evals = info.get("evals", {})
            if "evidence" in evals:
                found.append(["gate", "evaluate", "--checkpoint", info["checkpoint_id"],
                              "--registry", str(registry), "--json"])  # fmt: skip
            if "canary" in evals:
                found.append(["canary", "evaluate", "--checkpoint", info["checkpoint_id"],
                              "--registry", str(registry), "--json"])  # fmt: skip
    return found


def run(checkout: Path, args: list[str]) -> tuple[int, str]:
    done = subprocess.run([str(checkout / ".venv" / "bin" / "rtrl"), *args], cwd=checkout,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    return done.returncode, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the checkout before")
    parser.add_argument("--new", type=Path, required=True, help="the checkout after")
    parser.add_argument("--files", type=Path, required=True, help="where the files are")
    args = parser.parse_args()
    todo = commands(args.files)
    differ = 0
    for command in todo:
        old, new = run(args.old.resolve(), command), run(args.new.resolve(), command)
        same = old == new
        differ += not same
        print(
            f"{'same' if same else 'DIFFERENT'} (exit {old[0]}/{new[0]}): rtrl {' '.join(command)}"
        )
        if not same:
            print(f"  old: {old[1][:400]}\n  new: {new[1][:400]}")
    print(f"{len(todo) - differ} of {len(todo)} commands gave the same exit code and output")
    return 1 if differ or not todo else 0


if __name__ == "__main__":
    sys.exit(main())
