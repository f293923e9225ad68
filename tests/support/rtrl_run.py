"""``rtrl run`` as a subprocess with a deadline that leaves evidence.

Under pytest-timeout's own deadline a stuck run is killed with nothing to read, and its
brokers and engine servers (each in a session of its own) outlive it and slow the tests after
it. Here the run gets a deadline inside the test's: past it, it is interrupted as a person
would (SIGINT: its ``finally`` blocks stop what it started), killed if it does not end, and
the test fails with the tails of its output and of every log under ``data_dir/logs``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

TAIL_CHARS = 3000


def tails(data_dir: Path, stdout: str, stderr: str) -> str:
    """The last lines of the run's output and of each of its logs."""
    parts = [f"--- stdout\n{stdout[-TAIL_CHARS:]}", f"--- stderr\n{stderr[-TAIL_CHARS:]}"]
    for log in sorted((data_dir / "logs").glob("*.log")):
        text = log.read_text(errors="replace")
        parts.append(f"--- {log.name}\n{text[-TAIL_CHARS:]}")
    return "\n".join(parts)


def run_rtrl(
    args: list[str], data_dir: Path, timeout_s: float = 540, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m rtrl.cli run ARGS --data-dir DATA_DIR``; fails the test, with the logs'
    tails, when it has not ended within ``timeout_s`` (below pytest's 600 s)."""
    argv = [sys.executable, "-m", "rtrl.cli", "run", "--data-dir", str(data_dir), *args]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail(
            f"rtrl run did not end within {timeout_s:.0f} s\n" + tails(data_dir, stdout, stderr)
        )
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
