"""The small repository an agent works in: one task's module and its visible tests, in a
directory of its own, and the tools that act on it for real.

The agent world of `rtrl run --world agent` gives each run a fresh copy: ``solution.py`` with a
stub of the task's function (its docstring says what it must do) and ``test_solution.py`` with
the task's *visible* cases as asserts. The task's hidden cases never enter the directory: they
decide, after the run, whether the user keeps what the agent wrote.

Every path a tool is given is the model's text, so it is untrusted: an absolute path, a ``..``
that climbs out, a symbolic link that points out, a NUL byte, are refused (:class:`Refused`)
before anything is opened, and writes never follow a link. Files and the number of files are
bounded, so a run cannot fill the disk. The model's code is never run here: ``run_tests`` hands
the module's text to the sandbox (``agent.sandbox.grade``, its time, CPU, memory and file
limits) with the visible cases, as the hidden cases are run after the run.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agent.sandbox import Failure, Grade, Limits, grade
from agent.tasks import Task

MODULE, TESTS = "solution.py", "test_solution.py"
MAX_FILE_BYTES = 16 * 1024  # a tool's file: what a one-function task needs, many times over
MAX_FILES = 16  # files in the repository, written ones included
MAX_READ_CHARS = 2000  # of a file sent back to the model (its context is short)


class Refused(Exception):
    """A tool call that cannot be carried out; the message is what the model is told."""


@dataclass(frozen=True)
class FileChange:
    """What a write changed: the file and its lines added and removed (a unified diff's)."""

    path: str
    lines_added: int
    lines_removed: int


def stub(task: Task) -> str:
    """The module as the repository starts: the function's signature, what it must do (the
    task's prompt after its first colon), and no body.

    >>> from agent.tasks import get_task
    >>> print(stub(get_task("double")))
    def double(x):
        \"\"\"Return twice the number `x`.\"\"\"
        raise NotImplementedError
    <BLANKLINE>
    """
    what = task.prompt.partition(": ")[2].strip() or task.prompt
    return (f"def {task.signature}:\n    \"\"\"{what[0].upper()}{what[1:]}\"\"\"\n"
            "    raise NotImplementedError\n")  # fmt: skip


def visible_tests(task: Task) -> str:
    """``test_solution.py``: the task's visible cases as a pytest test.

    >>> from agent.tasks import get_task
    >>> print(visible_tests(get_task("double")))
    from solution import double
    <BLANKLINE>
    <BLANKLINE>
    def test_double():
        assert double(5) == 10
        assert double(-2) == -4
    <BLANKLINE>
    """
    lines = [f"from solution import {task.function}", "", "", f"def test_{task.function}():"]
    for case in task.visible:
        call = f"{task.function}({', '.join(map(repr, case.args))})"
        if case.raises is not None:
            lines += [f"    with pytest.raises({case.raises}):", f"        {call}"]
        else:
            lines.append(f"    assert {call} == {case.expected!r}")
    if any(case.raises for case in task.visible):
        lines.insert(0, "import pytest")
    return "\n".join(lines) + "\n"


def report_tests(graded: Grade, task: Task) -> str:
    """What ``run_tests`` tells the model: how many visible tests passed, and each failure.

    >>> from agent.tasks import get_task
    >>> print(report_tests(Grade(2, 1, None, "", (), False), get_task("double")))
    1 of 2 tests passed
    """
    if graded.failure is not None:
        why = f": {graded.detail}" if graded.detail else ""
        return f"0 of {graded.total} tests passed: {MODULE} {graded.failure.value}{why}"
    lines = [f"{graded.total - graded.failed} of {graded.total} tests passed"]
    for case, outcome in zip(task.visible, graded.cases, strict=False):
        if not outcome.passed:
            call = f"{task.function}({', '.join(map(repr, case.args))})"
            got = f"raised {outcome.raised}" if outcome.raised else "returned something else"
            lines.append(f"FAILED: {call} {got}")
    return "\n".join(lines)


class Workspace:
    """One run's repository in a temporary directory (a context manager: removed on exit)."""

    def __init__(self, task: Task, parent: Path | None = None) -> None:
        if not task.visible:
            raise ValueError(f"{task.function}: no visible cases for the repository's tests")
        self.task = task
        self._tmp = tempfile.mkdtemp(prefix="rtrl-repo-", dir=parent)
        self.root = Path(self._tmp).resolve()
        self.initial = {MODULE: stub(task), TESTS: visible_tests(task)}
        for name, text in self.initial.items():
            (self.root / name).write_text(text, encoding="utf-8")

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def resolve(self, path: object) -> Path:
        """``path`` inside the repository, or :class:`Refused` (checked before any open)."""
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise Refused("a path is a non-empty relative file name")
        if os.path.isabs(path):
            raise Refused(f"{path}: only paths inside the repository are allowed")
        target = (self.root / path).resolve()
        if target == self.root or not target.is_relative_to(self.root):
            raise Refused(f"{path}: only paths inside the repository are allowed")
        return target

    def read(self, path: object) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise Refused(f"{path}: no such file")
        text = target.read_bytes()[:MAX_FILE_BYTES].decode("utf-8", "replace")
        return text if len(text) <= MAX_READ_CHARS else text[:MAX_READ_CHARS] + "\n[cut]"

    def write(self, path: object, content: object) -> FileChange | None:
        """Write the whole file; what changed (None: the file already held ``content``)."""
        target = self.resolve(path)
        if not isinstance(content, str):
            raise Refused("content is the file's whole text")
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise Refused(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        if target.is_dir():
            raise Refused(f"{path}: is a directory")
        old = target.read_text("utf-8", "replace") if target.is_file() else None
        if old is None and sum(1 for p in self.root.rglob("*") if p.is_file()) >= MAX_FILES:
            raise Refused(f"the repository holds {MAX_FILES} files already")
        if old == content:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(self.root):  # a link made in between
            raise Refused(f"{path}: only paths inside the repository are allowed")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        added, removed = diff_counts(old or "", content)
        return FileChange(str(target.relative_to(self.root)), added, removed)

    def module(self) -> str:
        """The module's text now (what the hidden tests grade)."""
        target = self.root / MODULE
        return target.read_text("utf-8", "replace") if target.is_file() else ""

    def module_changed(self) -> bool:
        return self.module() != self.initial[MODULE]

    def run_tests(self, limits: Limits | None = None) -> str:
        """The visible tests, run in the sandbox against the module as it is now."""
        visible = self.task.model_copy(update={"cases": self.task.visible})
        source = self.module()
        if not source:
            return f"0 of {len(visible.cases)} tests passed: {MODULE} {Failure.load_error.value}"
        return report_tests(grade(source, visible, limits or Limits()), self.task)


def diff_counts(old: str, new: str) -> tuple[int, int]:
    """Lines added and removed from ``old`` to ``new``.

    >>> diff_counts("a\\nb\\n", "a\\nc\\nd\\n")
    (2, 1)
    """
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith(("+++", "---", "@@")):
            continue
        added += line.startswith("+")
        removed += line.startswith("-")
    return added, removed
