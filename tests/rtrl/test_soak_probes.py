"""The soak's probes of the processes it runs, on real process trees: a service's CPU seconds
keep a child that has ended (the gateway's llama-server replaced or killed), and the
"kill the gateway's llama-server" fault kills the named children and waits for their
successors."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support.cpu_ledger import CpuLedger
from tests.support.process_tree import children_named, kill_children_named

# a parent that starts a child burning ~0.6 s of CPU, then waits on past its end
BURN_THEN_WAIT = (
    "import subprocess, sys, time\n"
    "subprocess.run([sys.executable, '-c', "
    "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass'])\n"
    "time.sleep(30)\n"
)


def test_a_child_that_ended_keeps_its_cpu_seconds() -> None:
    parent = subprocess.Popen([sys.executable, "-c", BURN_THEN_WAIT])
    ledger = CpuLedger()
    try:
        deadline = time.monotonic() + 20
        seen_child = False
        while time.monotonic() < deadline:
            ledger.sample("gateway", parent.pid)
            children = children_named(parent.pid, "python")
            seen_child = seen_child or bool(children)
            if seen_child and not children:
                break  # the child has ended
            time.sleep(0.05)
        assert seen_child
        ledger.sample("gateway", parent.pid)
        # the parent alone used well under 0.3 s; its ended child's 0.6 s is still counted
        assert ledger.totals()["gateway"] > 0.4, ledger.totals()
    finally:
        parent.kill()
        parent.wait()


def test_killed_children_are_found_by_name_and_their_successors_awaited() -> None:
    # a supervisor of its own kind: a shell that starts `sleep` again whenever it ends
    shell = subprocess.Popen(["sh", "-c", "while true; do sleep 60; done"])
    try:
        deadline = time.monotonic() + 10
        while not children_named(shell.pid, "sleep") and time.monotonic() < deadline:
            time.sleep(0.05)
        first = children_named(shell.pid, "sleep")
        assert len(first) == 1
        killed, back_s = kill_children_named(shell.pid, "sleep", timeout_s=10)
        assert killed == first and back_s < 10
        again = children_named(shell.pid, "sleep")
        assert again and again != first
        with pytest.raises(ValueError, match="no llama-server"):
            kill_children_named(shell.pid, "llama-server")
    finally:
        shell.kill()
        shell.wait()


def test_a_child_not_started_again_is_a_timeout() -> None:
    shell = subprocess.Popen(["sh", "-c", "sleep 60; true"])  # no second sleep after the kill
    try:
        deadline = time.monotonic() + 10
        while not children_named(shell.pid, "sleep") and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(TimeoutError, match="not started again"):
            kill_children_named(shell.pid, "sleep", timeout_s=1.0)
    finally:
        shell.kill()
        shell.wait()
