"""A stage of `rtrl run` dies with the run: a run killed before its ``finally`` stopped its
stages (a deadline's SIGINT, then SIGKILL) used to leave its collector behind, holding a port
for the tests after it, and a one-shot stage (`rtrl train`) training on every core."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from infra.ports import free_port_block
from tests.support.rtrl_run import process_tree, with_hung_java

REPO = Path(__file__).resolve().parents[2]
_RUN = """
import sys, time
from pathlib import Path
from rtrl.run.procs import Stage
args = ["collector", "--port", sys.argv[1], "--key-db", sys.argv[2], "--bootstrap", "127.0.0.1:1"]
stage = Stage("collector", args, Path(sys.argv[3])).start()
print(stage.proc.pid, flush=True)
time.sleep(600)
"""

# a one-shot stage that never ends: `rtrl broker start` asking a `java -version` that never answers
_ONE_SHOT = """
import sys
from pathlib import Path
from rtrl.run.procs import run_stage
run_stage("broker", ["broker", "start", "--data-dir", sys.argv[1]], Path(sys.argv[2]))
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state == "Z"


def _dies_with(run: subprocess.Popen, stage: int, what: str) -> None:
    """``stage`` runs while ``run`` does, and is gone soon after ``run`` is killed (SIGKILL: no
    ``finally``, no stop)."""
    time.sleep(1.0)
    assert not _gone(stage)
    run.kill()
    run.wait(10)
    deadline = time.monotonic() + 10
    while not _gone(stage):
        if time.monotonic() > deadline:
            subprocess.run(["kill", "-9", str(stage)], check=False)
            raise AssertionError(f"{what} outlived the run that started it")
        time.sleep(0.05)


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
    _dies_with(run, stage, "the collector")


def test_a_one_shot_stage_dies_with_a_run_killed_while_it_ran(tmp_path: Path) -> None:
    env = with_hung_java(tmp_path / "bin")
    run = subprocess.Popen(
        [sys.executable, "-c", _ONE_SHOT, str(tmp_path / "kafka"), str(tmp_path / "b.log")],
        cwd=REPO,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not (stages := process_tree()[0].get(run.pid, [])):
        assert time.monotonic() < deadline, "the stage did not start"
        time.sleep(0.1)
    (stage,) = stages  # `rtrl broker start`, waiting for its java while the run waits for it
    _dies_with(run, stage, "the one-shot stage")  # subprocess.run's own kill never runs
