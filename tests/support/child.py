"""`rtrl` commands as child processes of a test: started with their output in a log file, and
polled until they answer over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

import httpx

REPO = Path(__file__).resolve().parents[2]


def start_rtrl(args: list[str], log: Path, env: dict[str, str] | None = None
               ) -> tuple[subprocess.Popen[bytes], BinaryIO]:  # fmt: skip
    """`python -m rtrl.cli ARGS` from the repository, its output appended to ``log`` (the
    returned file, for the caller to close once the process is gone)."""
    out = open(log, "ab")  # noqa: SIM115 - the caller closes it
    command = [sys.executable, "-m", "rtrl.cli", *args]
    proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})  # fmt: skip
    return proc, out


def answers(proc: subprocess.Popen[bytes], url: str, timeout_s: float, pause_s: float) -> bool:
    """Whether ``url`` answered 200 before ``timeout_s`` passed (False at once if ``proc``
    exits first), asked every ``pause_s`` while nothing listens."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(pause_s)
    return False


def stop(proc: subprocess.Popen[bytes], out: BinaryIO, timeout_s: float) -> int:
    """SIGTERM (if still running), ``timeout_s`` to exit, then SIGKILL; the log file closed.
    Returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait(10)
    out.close()
    return code
