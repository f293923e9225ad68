"""A run past its deadline names where it waited: the stacks of its processes, not only the
last lines of its logs (``tests/support/rtrl_run.py``, ``infra.lifetime.dump_stacks_on_signal``).

The hang is made on purpose and cheaply: a ``java`` first on the PATH that never answers
``java -version``, which `rtrl run` asks before it starts its broker.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infra.broker_config import ClusterLayout
from tests.support.kafka import free_port_block
from tests.support.rtrl_run import run_rtrl, server_logs, stop_left_broker, with_hung_java


def test_a_run_past_its_deadline_fails_with_the_stack_it_waited_in(tmp_path: Path) -> None:
    env = with_hung_java(tmp_path / "bin")
    args = ["--world", "tokens", "--port", str(free_port_block(2))]
    with pytest.raises(pytest.fail.Exception) as failed:
        run_rtrl(args, tmp_path / "run", timeout_s=25, env=env)
    message = str(failed.value)
    assert "did not end within 25 s" in message
    stacks = message.split("--- stacks: rtrl run\n", 1)[1].split("\n--- stdout\n", 1)[0]
    # the run's main thread, from the command down to the wait
    assert "(most recent call first)" in stacks, message[-4000:]
    for where in ("in main", "in run", "in check_java", "in communicate"):
        assert where in stacks, (where, stacks)


def test_the_llama_server_logs_a_run_names_are_found(tmp_path: Path) -> None:
    (tmp_path / "llama-server-4242.log").write_text("srv  update_slots: all slots are idle\n")
    said = [
        "INFO llamacpp.fleet: serving: llama-server for smollm2-0000 on port 4242 (x.gguf)",
        "INFO llamacpp.fleet: serving: llama-server for c1 on port 4343 (never logged)",
    ]
    assert server_logs(said, tmp_path) == [tmp_path / "llama-server-4242.log"]


def test_a_killed_runs_broker_is_stopped_after_it(tmp_path: Path) -> None:
    """The run's state file names a node still running (a stand-in process in a session of its
    own, as `infra.broker` starts a node): the deadline stops it."""
    node = subprocess.Popen(["sleep", "60"], start_new_session=True)
    layout = ClusterLayout(tmp_path / "kafka")
    layout.data_dir.mkdir()
    layout.state_file.write_text(json.dumps({"cluster_id": "c", "processes": [
        {"node": 0, "pid": node.pid}]}))  # fmt: skip
    try:
        assert stop_left_broker(tmp_path) == 1
        assert node.wait(5) is not None
        assert stop_left_broker(tmp_path) == 0  # nothing left: nothing to stop
    finally:
        node.kill()
