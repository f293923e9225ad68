"""``rtrl run`` as a subprocess with a deadline that leaves evidence.

Under pytest-timeout's own deadline a stuck run is killed with nothing to read, and its
brokers and engine servers (each in a session of its own) outlive it and slow the tests after
it. Here the run gets a deadline inside the test's: past it, every ``rtrl`` process of the run
(the run and its stages) is asked for its threads' stacks (``infra.lifetime``: SIGUSR1), then the
run is interrupted as a person would (SIGINT: its ``finally`` blocks stop what it started),
killed if it does not end, and the test fails with the stacks, the tails of its output, of every
log under ``data_dir/logs`` and of the llama-server logs those name: where it waited, not only
what it said last.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import default_cache_root
from infra.lifetime import STACKS_SIGNAL
from llamacpp.build import engine_dir

TAIL_CHARS = 3000
STACK_CHARS = 12000  # of each process's dump: a gateway's threads take a few thousand
# past the deadline, at most ~44 s more before the test fails (so 540 s stays below pytest's
# 600 s): the stacks, then SIGINT's grace for the run's ``finally``, then SIGKILL's wait
DUMP_WAIT_S = 3.0
INTERRUPT_GRACE_S = 30.0
KILL_WAIT_S = 10.0
SERVER_PORT = re.compile(r"llama-server for .* on port (\d+)")


def tails(data_dir: Path, stdout: str, stderr: str) -> str:
    """The last lines of the run's output, of each of its logs, and of the logs of the
    llama-servers they name (those are written under the llama.cpp cache)."""
    parts = [f"--- stdout\n{stdout[-TAIL_CHARS:]}", f"--- stderr\n{stderr[-TAIL_CHARS:]}"]
    texts = [stderr]
    for log in sorted((data_dir / "logs").glob("*.log")):
        text = log.read_text(errors="replace")
        texts.append(text)
        parts.append(f"--- {log.name}\n{text[-TAIL_CHARS:]}")
    for log in server_logs(texts, engine_dir(default_cache_root(os.environ)) / "logs"):
        parts.append(f"--- {log}\n{log.read_text(errors='replace')[-TAIL_CHARS:]}")
    return "\n".join(parts)


def server_logs(texts: list[str], log_dir: Path) -> list[Path]:
    """The logs of the llama-servers that ``texts`` say were started (``llamacpp.fleet``)."""
    ports = sorted({int(p) for text in texts for p in SERVER_PORT.findall(text)})
    logs = [log_dir / f"llama-server-{port}.log" for port in ports]
    return [log for log in logs if log.is_file()]


def process_tree() -> tuple[dict[int, list[int]], dict[int, bytes]]:
    """Every process's children and command line, from ``/proc``."""
    children: dict[int, list[int]] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children, commands


def rtrl_processes(root: int) -> list[int]:
    """``root`` and its descendants that are ``rtrl`` commands (the run and its stages: each
    dumps its stacks on SIGUSR1)."""
    children, commands = process_tree()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if b"rtrl.cli" in commands.get(pid, b""):
            found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def ask_for_stacks(
    proc: subprocess.Popen[str], data_dir: Path
) -> tuple[str, tuple[str, str] | None]:
    """Every ``rtrl`` process of the run writes its stacks (into its log; the run's into its
    stderr); what each wrote, from the logs as they grew and the run's stderr so far, and the
    run's whole output if it ended meanwhile."""
    logs = sorted((data_dir / "logs").glob("*.log"))
    sizes = {log: log.stat().st_size for log in logs}
    for pid in rtrl_processes(proc.pid):
        try:
            os.kill(pid, STACKS_SIGNAL)
        except ProcessLookupError:
            pass
    ended = None
    try:
        ended = proc.communicate(timeout=DUMP_WAIT_S)
        err = ended[1]
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    parts = [f"--- stacks: rtrl run\n{err[-STACK_CHARS:]}"]
    time.sleep(0.5)  # the stages' dumps reach their files
    for log in logs:
        with open(log, "rb") as f:
            f.seek(sizes[log])
            grown = f.read().decode(errors="replace")
        if grown:
            parts.append(f"--- stacks: {log.name}\n{grown[:STACK_CHARS]}")
    return "\n".join(parts), ended


def run_rtrl(
    args: list[str], data_dir: Path, timeout_s: float = 540, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m rtrl.cli run ARGS --data-dir DATA_DIR``; fails the test, with the stacks of
    its processes and the logs' tails, when it has not ended within ``timeout_s`` (below
    pytest's 600 s)."""
    argv = [sys.executable, "-m", "rtrl.cli", "run", "--data-dir", str(data_dir), *args]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stacks, ended = ask_for_stacks(proc, data_dir)
        stdout, stderr = ended or _interrupted(proc)
        stop_left_broker(data_dir)
        pytest.fail(
            f"rtrl run did not end within {timeout_s:.0f} s\n{stacks}\n"
            + tails(data_dir, stdout, stderr)
        )
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _interrupted(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The run's output once SIGINT stopped it (SIGKILL when it has not ended
    ``INTERRUPT_GRACE_S`` later)."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
    try:  # a child left holding the run's pipes must not hold the test past pytest's deadline
        return proc.communicate(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        return "", "(the run's output pipes were still held by its children)"


def stop_left_broker(data_dir: Path) -> int:
    """Stop the run's Kafka nodes that are still running (how many): a run killed before its
    ``finally`` leaves them, each in a session of its own, holding memory and ports beside the
    tests after it; its stages and servers die with it by themselves."""
    return broker.stop(ClusterLayout(data_dir.resolve() / "kafka"), timeout=10)


def with_hung_java(folder: Path, hang_s: int = 60) -> dict[str, str]:
    """The environment with a ``java`` first on its PATH that never answers (``java -version``
    included) for ``hang_s`` seconds: `rtrl run` and `rtrl broker start` wait for it before
    they start a broker, a hang made on purpose, cheaply."""
    folder.mkdir(parents=True, exist_ok=True)
    java = folder / "java"
    java.write_text(f"#!/bin/sh\nexec sleep {hang_s}\n")
    java.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
