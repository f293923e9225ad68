#!/usr/bin/env python3
"""How long `make test` takes, phase by phase: the figure CI's budget is spent on.

The phases are read from ``scripts/test`` itself (each command line of it, in order), so this
benchmark times exactly what CI runs: the setup (warm caches after the first), the schema
check, ruff, mypy and pytest. Each phase runs as its own process under ``bash``; pytest's
closing line gives the test count, and its ``--durations`` list the slowest tests. Figures are
printed beside the budget (30 minutes, and the goal of 20) and written to
``bench/out/suite_phases.json``.

    python bench/suite_phases.py [--repo PATH] [--slowest 20] [-- PYTEST_ARGS...]

``--repo`` times another checkout (an older tree, for a before and after); the default is this
one. A phase that fails is reported with its exit code and the suite goes on to the next, as
the figures of a red run are still figures (the table says it was red).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, format_table, write_results  # noqa: E402

BUDGET_S = 30 * 60  # our CI budget (the workplace's limit is 90 minutes)
GOAL_S = 20 * 60  # the house issue's goal for the whole suite on two cores
_SKIPPED = ("set ", "cd ")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=\S")
_SUMMARY = re.compile(r"^=+ (?P<text>.*\b(passed|failed|error)\b.*) in (?P<s>[\d.]+)s")
_DURATION = re.compile(r"^(?P<s>[\d.]+)s (?P<when>call|setup|teardown)\s+(?P<test>\S+)")


def phases(script: str) -> list[str]:
    """The command lines of a bash script, continuations joined, ``exec`` dropped; a variable
    assignment is not a phase of its own but runs before every command after it.

    >>> phases('#!/bin/bash\\nset -e\\ncd x\\nscripts/bootstrap\\nexec a \\\\\\n  b "$@"\\n')
    ['scripts/bootstrap', 'a b "$@"']
    >>> phases('a\\nn=$(nproc)\\nexec b -n "$n"\\n')
    ['a', 'n=$(nproc); b -n "$n"']
    """
    joined = re.sub(r"\s*\\\n\s*", " ", script)
    lines = [line.strip() for line in joined.splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#")]
    commands = [ln for ln in commands if not ln.startswith(_SKIPPED)]
    assigned: list[str] = []
    out: list[str] = []
    for line in commands:
        if _ASSIGNMENT.match(line):
            assigned.append(line)
        else:
            out.append("; ".join([*assigned, line.removeprefix("exec ")]))
    return out


def phase_name(command: str) -> str:
    """A short name for a phase: its program and first word.

    >>> phase_name(".venv/bin/ruff format --check ."), phase_name("scripts/bootstrap")
    ('ruff format', 'bootstrap')
    >>> phase_name('.venv/bin/python -m pytest -p no:cacheprovider -n 2')
    'pytest'
    >>> phase_name('env A="${A:-1}" .venv/bin/python -m pytest -n 2')
    'pytest'
    >>> phase_name(".venv/bin/python -m llamacpp.build >/dev/null")
    'llamacpp.build'
    """
    words = command.split("; ")[-1].split()
    if words and words[0] == "env":  # env NAME=VALUE... PROGRAM: the program's name
        words = [w for w in words[1:] if "=" not in w] or words
    program = Path(words[0]).name
    if program == "python" and words[1:2] == ["-m"] and len(words) > 2:
        return words[2]  # the module: pytest, llamacpp.build
    if program in ("ruff", "rtrl") and len(words) > 1:
        return f"{program} {words[1]}"
    return program


def pytest_figures(output: str, slowest: int) -> dict[str, Any]:
    """pytest's closing line and its slowest tests (call phase), from its output.

    >>> out = "5.10s call     tests/a.py::t\\n0.20s setup    tests/b.py::u\\n"
    >>> out += "===== 3 passed, 1 skipped in 12.5s =====\\n"
    >>> f = pytest_figures(out, 5)
    >>> f["summary"], f["slowest"]
    ('3 passed, 1 skipped', [{'seconds': 5.1, 'when': 'call', 'test': 'tests/a.py::t'}, \
{'seconds': 0.2, 'when': 'setup', 'test': 'tests/b.py::u'}])
    """
    summary = None
    durations: list[dict[str, Any]] = []
    for line in output.splitlines():
        if m := _SUMMARY.match(line.strip()):
            summary = m.group("text")
        elif m := _DURATION.match(line.strip()):
            seconds, when, test = float(m.group("s")), m.group("when"), m.group("test")
            durations.append({"seconds": seconds, "when": when, "test": test})
    durations.sort(key=lambda row: -float(row["seconds"]))
    return {"summary": summary, "slowest": durations[:slowest]}


def run_phase(repo: Path, command: str, log: Path) -> dict[str, Any]:
    start = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(["bash", "-c", command], cwd=repo, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    return {"phase": phase_name(command), "command": command, "rc": rc.returncode, "s": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to time")
    parser.add_argument("--slowest", type=int, default=20, help="slowest tests to list")
    parser.add_argument("pytest_args", nargs="*", help="after --: more arguments for pytest")
    args = parser.parse_args()
    repo = args.repo.resolve()
    logs = REPO / "bench" / "out" / "suite_phases"
    logs.mkdir(parents=True, exist_ok=True)
    extra = " ".join(args.pytest_args)
    durations = f"--durations={args.slowest}"
    rows = []
    for command in phases((repo / "scripts" / "test").read_text()):
        command = command.replace('"$@"', f"{durations} {extra}".strip())
        name = phase_name(command)
        print(f"suite: {name} ...", flush=True)
        rows.append(run_phase(repo, command, logs / f"{name.replace(' ', '_')}.log"))
        print(f"suite: {name}: {rows[-1]['s']:.0f} s, exit {rows[-1]['rc']}", flush=True)
    pytest_log = logs / "pytest.log"
    tests = pytest_figures(pytest_log.read_text() if pytest_log.exists() else "", args.slowest)
    total = sum(row["s"] for row in rows)
    table = [[r["phase"], f"{r['s']:.0f}", r["rc"]] for r in rows]
    table.append(["the whole suite", f"{total:.0f}", max(r["rc"] for r in rows)])
    table.append(["goal / budget", f"{GOAL_S} / {BUDGET_S}", ""])
    print(format_table(["phase", "seconds", "exit"], table))
    print(f"pytest: {tests['summary']}")
    print(format_table(["seconds", "when", "test"], [list(r.values()) for r in tests["slowest"]]))
    write_results("suite_phases", {"repo": str(repo), "phases": rows, "total_s": total, **tests})
    return max(r["rc"] for r in rows)


if __name__ == "__main__":
    sys.exit(main())
