"""The offset guard and the supervisor that restarts the worker: pure rules, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from streams.exit_codes import EXIT_FAILED_CHUNK, EXIT_OFFSET_HOLE
from streams.offsets import Hole, HoleLog, OffsetGuard, Verdict
from streams.supervisor import RestartPolicy, supervise


def test_a_new_generation_forgets_the_old_expectations() -> None:
    guard = OffsetGuard()
    guard.begin(1, {0: 5, 1: 0})
    assert [guard.check(0, o) for o in (5, 6)] == [Verdict.next, Verdict.next]
    guard.begin(2, {0: 6})
    assert not guard.knows(2, 1) and guard.knows(2, 0) and not guard.knows(1, 0)
    assert guard.check(0, 6) is Verdict.next
    guard.begin(2, {1: 3})  # same generation: adds a partition, keeps the others
    assert guard.check(0, 7) is Verdict.next and guard.check(1, 3) is Verdict.next


def test_a_hole_changes_nothing_until_accepted() -> None:
    guard = OffsetGuard()
    guard.begin(1, {0: 10})
    assert guard.check(0, 12) is Verdict.hole
    assert guard.check(0, 12) is Verdict.hole  # still: 10 and 11 were never seen
    assert guard.hole_at(0, 12) == Hole(0, 10, 12)
    assert guard.check(0, 10) is Verdict.next


def test_the_hole_log_survives_a_corrupt_file_and_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "holes.json"
    path.write_text("{not json")
    log = HoleLog(path)
    assert not log.seen_before(Hole(0, 1, 2))
    for i in range(5):
        log.remember(Hole(0, i, i + 2), keep=3)
    assert [log.seen_before(Hole(0, i, i + 2)) for i in range(5)] == [False] * 2 + [True] * 3


def test_restart_policy_backs_off_and_gives_up() -> None:
    policy = RestartPolicy(max_failures=3, window_s=10, first_pause_s=0.5, max_pause_s=1.0)
    pauses = [policy.pause_after(EXIT_FAILED_CHUNK, t) for t in (0, 1, 2)]
    assert pauses == [0.5, 1.0, 1.0]
    assert policy.pause_after(EXIT_OFFSET_HOLE, 3) == 0.0  # never counted
    assert policy.pause_after(-9, 4) is None


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path), str(tmp_path)]


def test_supervisor_restarts_until_a_clean_exit(tmp_path: Path) -> None:
    cmd = _script(
        tmp_path,
        """
        import sys, pathlib
        runs = pathlib.Path(sys.argv[1]) / "runs"
        n = len(runs.read_text()) if runs.exists() else 0
        runs.write_text("x" * (n + 1))
        sys.exit([75, 70, 75, 0][n])
    """,
    )
    policy = RestartPolicy(first_pause_s=0.05)
    assert supervise(cmd, policy) == 0
    assert (tmp_path / "runs").read_text() == "xxxx"
    assert len(policy.failures) == 1  # only the 70 counts as a failure


def test_supervisor_gives_up_with_the_workers_code(tmp_path: Path) -> None:
    cmd = _script(tmp_path, "import sys; sys.exit(3)")
    policy = RestartPolicy(max_failures=2, first_pause_s=0.01)
    started = time.monotonic()
    assert supervise(cmd, policy) == 3
    assert len(policy.failures) == 3 and time.monotonic() - started < 10


def _supervised_sleeper(tmp_path: Path) -> subprocess.Popen:
    """A real supervisor whose child records its pid, then waits for SIGTERM."""
    child = tmp_path / "child.py"
    child.write_text(
        textwrap.dedent("""
        import os, signal, sys, time
        from infra.lifetime import die_with_parent
        die_with_parent(int(sys.argv[2]))
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        open(os.path.join(sys.argv[1], "pid"), "w").write(str(os.getpid()))
        time.sleep(120)
    """)
    )
    code = (
        "import os, sys; from streams.supervisor import supervise; "
        f"sys.exit(supervise([sys.executable, {str(child)!r}, {str(tmp_path)!r}, "
        "str(os.getpid())]))"
    )
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _child_pid(tmp_path: Path) -> int:
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    return int((tmp_path / "pid").read_text())


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_sigterm_is_passed_to_the_worker_and_ends_the_supervisor(tmp_path: Path) -> None:
    sup = _supervised_sleeper(tmp_path)
    child = _child_pid(tmp_path)
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert _gone(child)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_supervisor_leaves_no_orphan_worker(tmp_path: Path) -> None:
    sup = _supervised_sleeper(tmp_path)
    child = _child_pid(tmp_path)
    sup.kill()  # SIGKILL to the supervisor alone, not its process group
    sup.wait(30)
    assert _gone(child), "the worker outlived its supervisor"
