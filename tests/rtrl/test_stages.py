"""A stage of `rtrl run` dies with the run: a run killed before its ``finally`` stopped its
stages (a deadline's SIGINT, then SIGKILL) used to leave its collector behind, holding a port
for the tests after it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from infra.ports import free_port_block

REPO = Path(__file__).resolve().parents[2]
_RUN = """
import sys, time
from pathlib import Path
from rtrl.run.procs import Stage
args = ["collector", "--port", sys.argv[1], "--db", sys.argv[2], "--bootstrap", "127.0.0.1:1"]
stage = Stage("collector", args, Path(sys.argv[3])).start()
print(stage.proc.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state == "Z"


def test_a_stage_dies_with_a_run_killed_before_it_stopped_its_stages(tmp_path: Path) -> None:
    port = str(free_port_block(1))
    run = subprocess.Popen(
        [sys.executable, "-c", _RUN, port, str(tmp_path / "keys.db"), str(tmp_path / "c.log")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None
    stage = int(run.stdout.readline())
    time.sleep(1.0)
    assert not _gone(stage)  # the stage runs while the run does
    run.kill()  # SIGKILL: no finally, no stop
    run.wait(10)
    deadline = time.monotonic() + 10
    while not _gone(stage):
        if time.monotonic() > deadline:
            subprocess.run(["kill", "-9", str(stage)], check=False)
            raise AssertionError("the collector outlived the run that started it")
        time.sleep(0.05)
