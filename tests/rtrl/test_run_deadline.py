"""A run past its deadline names where it waited: the stacks of its processes, not only the
last lines of its logs (``tests/support/rtrl_run.py``, ``infra.lifetime.dump_stacks_on_signal``).

The hang is made on purpose and cheaply: a ``java`` first on the PATH that never answers
``java -version``, which `rtrl run` asks before it starts its broker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.kafka import free_port_block
from tests.support.rtrl_run import run_rtrl, server_logs


def test_a_run_past_its_deadline_fails_with_the_stack_it_waited_in(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexec sleep 120\n")  # never answers `java -version`
    java.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
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
