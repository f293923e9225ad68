"""Grade untrusted model code against a task's hidden tests, in a sandboxed child process.

Model output is untrusted code: it may loop forever, eat memory, read the environment, open
sockets or delete files. Each grading runs it in a fresh Python process (``sandbox_runner``)
that:

* runs with a wall-clock limit (killed with its process group), a CPU-seconds limit, an
  address-space limit, a file-size limit and ``RLIMIT_NPROC`` 0 (no new processes; root is
  exempt from that limit, and the audit hook refuses ``fork`` and ``exec`` for everyone);
* starts in an empty temporary directory, with an environment of ``PATH``, a locale and a fixed
  hash seed only (no secret of the parent's can be read), without ``site`` (no site-packages, no
  ``.pth`` files) and without the current directory on ``sys.path``;
* has no network: in a new user and network namespace (``unshare -rn``, only a loopback device
  that is down) when the machine allows it, and in every case behind an audit hook that refuses
  socket creation and connection, process creation, native calls and file writes
  (``sandbox_runner``), so it holds where ``unshare`` is missing too.

Why not ``python -I``: isolated mode ignores ``PYTHONHASHSEED``, so string hashing would be
random per run and code whose output depends on set order (``list(set(xs))``) would pass or fail
by chance. The environment is built here from nothing, so ``-S -P`` with a fixed seed isolates as
``-I`` does (``-I`` is ``-E -P -s``; ``-S`` also drops site-packages) and grades deterministically:
the same code and task give the same grade, unless the code's running time sits at a limit.

The hidden expected values stay in this process: the child gets the arguments, and its answers
are judged here by ``Case.judge``.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agent.sandbox_runner import EXIT_OUTPUT_TOO_LARGE
from agent.tasks import Case, Task

PYTHON_FLAGS = ("-S", "-P", "-B")  # no site, no script or cwd on sys.path, no bytecode written
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}
MAX_DETAIL_CHARS = 500


@dataclass(frozen=True)
class Limits:
    """What one grading may use."""

    wall_s: float = 5.0  # the whole run: start-up, loading the code, every case
    cpu_s: int = 3  # CPU seconds (SIGXCPU past it, SIGKILL a second later)
    memory_bytes: int = 512 * 2**20  # address space
    output_bytes: int = 2**20  # any file the child writes, its report included

    def __post_init__(self) -> None:
        if self.wall_s <= 0 or self.cpu_s < 1 or self.memory_bytes < 64 * 2**20:
            raise ValueError("limits: wall_s > 0, cpu_s >= 1, memory_bytes >= 64 MiB")
        if self.output_bytes < 4096:
            raise ValueError("limits: output_bytes >= 4096")


class Failure(enum.StrEnum):
    """Why the code could not be tested case by case (a failed case is not a failure here)."""

    syntax_error = "syntax_error"  # the code does not compile
    load_error = "load_error"  # running the module raised (detail: the exception)
    missing_function = "missing_function"  # the module defines no such callable
    timeout = "timeout"  # past the wall-clock limit
    cpu_limit = "cpu_limit"  # past the CPU limit
    output_limit = "output_limit"  # its report was larger than the file size limit
    crashed = "crashed"  # the process ended without a report (detail: status and stderr)


TIMED_OUT = frozenset({Failure.timeout, Failure.cpu_limit})
_LOAD_FAILURES = {
    f.value: f for f in (Failure.syntax_error, Failure.load_error, Failure.missing_function)
}


@dataclass(frozen=True)
class CaseOutcome:
    passed: bool
    raised: str | None  # the most specific built-in exception the call raised, if any


@dataclass(frozen=True)
class Grade:
    """The verdict on one piece of code for one task."""

    total: int  # hidden cases
    failed: int  # cases that did not pass; all of them when the code could not be tested
    failure: Failure | None
    detail: str  # what the failure was, in a few words ("" when none)
    cases: tuple[CaseOutcome, ...]  # one per case, in order; empty when none ran
    network_namespace: bool  # whether the child ran in its own network namespace

    @property
    def passed(self) -> bool:
        return self.failed == 0

    @property
    def timed_out(self) -> bool:
        return self.failure in TIMED_OUT


@functools.cache
def namespaces_available() -> bool:
    """Whether ``unshare -rn`` works here (user namespaces may be disabled by the kernel or a
    container's seccomp profile)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run(
            [unshare, "-rn", "true"], capture_output=True, timeout=10, env=CHILD_ENV
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def _runner_source() -> str:
    return resources.files("agent").joinpath("sandbox_runner.py").read_text("utf-8")


def command(use_namespace: bool, python: str = sys.executable) -> list[str]:
    """The child's command line: the runner's source through ``-c``, so the child needs no
    file of this package on its path."""
    line = [python, *PYTHON_FLAGS, "-c", _runner_source()]
    return ["unshare", "-rn", "--", *line] if use_namespace else line


def grade(
    code: str, task: Task, limits: Limits = Limits(), *, network_namespace: bool | None = None
) -> Grade:
    """Run ``code`` against ``task``'s hidden cases and judge each answer.

    ``network_namespace``: ``None`` uses one when ``unshare -rn`` works here; ``False`` relies on
    the audit hook alone (to test it); ``True`` insists.
    """
    use_namespace = namespaces_available() if network_namespace is None else network_namespace
    request = {
        "code": code,
        "function": task.function,
        "args": [list(case.args) for case in task.cases],
        "limits": {
            "cpu_s": limits.cpu_s,
            "memory_bytes": limits.memory_bytes,
            "output_bytes": limits.output_bytes,
        },
    }
    with tempfile.TemporaryDirectory(prefix="rtrl-grade-") as private:
        work = Path(private, "cwd")
        work.mkdir()
        status, report, stderr = _run(command(use_namespace), json.dumps(request), work, limits)
    return _judge(task, status, report, stderr, use_namespace)


def _run(argv: list[str], request: str, cwd: Path, limits: Limits) -> tuple[int | None, str, str]:
    """Exit status (None when killed at the wall-clock limit), report and stderr of the child.

    Its stdout and stderr are files in the parent's own directory, bounded by the child's file
    size limit, so a flood of output cannot fill this process's memory.
    """
    out_path, err_path = cwd.parent / "report", cwd.parent / "stderr"
    with open(out_path, "w+b") as out, open(err_path, "w+b") as err:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=CHILD_ENV,
            start_new_session=True,  # its own process group, killed whole
            close_fds=True,
        )
        status: int | None
        try:
            child.communicate(request.encode("utf-8"), timeout=limits.wall_s)
            status = child.returncode
        except subprocess.TimeoutExpired:
            status = None
        finally:
            _kill_group(child)
        return status, _read(out_path, limits.output_bytes), _read(err_path, MAX_DETAIL_CHARS)


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def _read(path: Path, limit: int) -> str:
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def _judge(task: Task, status: int | None, report: str, stderr: str, namespace: bool) -> Grade:
    total = len(task.cases)

    def failed(failure: Failure, detail: str) -> Grade:
        return Grade(total, total, failure, detail, (), namespace)

    if status is None:
        return failed(Failure.timeout, "killed at the wall-clock limit")
    if status == -signal.SIGXCPU:
        return failed(Failure.cpu_limit, "killed at the CPU limit")
    if status == EXIT_OUTPUT_TOO_LARGE:
        return failed(Failure.output_limit, "its answers exceed the output limit")
    outcome = _parse_report(report)
    if status != 0 or outcome is None:
        return failed(Failure.crashed, f"exit status {status}: {stderr.strip()[-200:]}")
    load = outcome.get("load")
    if load != "ok":
        failure = _LOAD_FAILURES.get(str(load), Failure.crashed)
        return failed(failure, str(outcome.get("detail", ""))[:MAX_DETAIL_CHARS])
    answers = outcome.get("cases")
    if not isinstance(answers, list) or len(answers) != total:
        return failed(Failure.crashed, "the report does not answer every case")
    cases = tuple(
        _judge_case(case, answer) for case, answer in zip(task.cases, answers, strict=True)
    )
    return Grade(total, sum(not c.passed for c in cases), None, "", cases, namespace)


def _parse_report(report: str) -> dict[str, Any] | None:
    lines = report.strip().splitlines()
    try:
        outcome = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return outcome if isinstance(outcome, dict) else None


def _judge_case(case: Case, answer: object) -> CaseOutcome:
    if not isinstance(answer, dict):
        return CaseOutcome(False, None)
    raised = answer.get("raised")
    if isinstance(raised, list) and raised and all(isinstance(n, str) for n in raised):
        return CaseOutcome(case.judge(None, tuple(raised)), raised[0])
    if "value" in answer:
        return CaseOutcome(case.judge(answer["value"], ()), None)
    return CaseOutcome(False, None)  # unserializable
