"""A round killed with SIGKILL mid-update resumes from its saved state and ends with exactly
the weights of a round that was never interrupted (same inputs, same seed)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time

import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from release.gate import GateConfig
from tests.support.checkpoints import serve, write_batch
from tests.support.rounds import round_options
from tests.trainer.round_probe import LEARNER
from trainer.train import train_round


def _saved_step(path) -> int:
    try:
        return int(torch.load(path, weights_only=True)["progress"]["step"])
    except (OSError, EOFError, RuntimeError, KeyError):
        return 0


def test_a_round_killed_mid_update_resumes_to_the_same_weights(registry, tmp_path, caplog):
    root = registry.get("t-0000")
    batch = write_batch(tmp_path / "b.parquet", serve(load_policy(registry, root), root, 120, 0))
    shutil.copytree(registry.root, tmp_path / "killed")
    killed = CheckpointRegistry(tmp_path / "killed")
    gate = GateConfig(min_gain=-100, max_kl=100)
    options = dict(options=round_options(registry, LEARNER, gate), alarms=[])

    whole = train_round(registry, "t-0000", [("b", [batch])], "t-0001", **options)
    assert whole is not None
    total_steps = whole.stats.grad_steps
    assert total_steps > 20

    state = killed.root / ".rounds" / "t-0001.pt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.trainer.round_probe", str(killed.root), str(batch), "t-0001"],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while _saved_step(state) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.kill()
    proc.wait(30)
    at = _saved_step(state)
    assert 3 <= at < total_steps, f"killed at step {at} of {total_steps}"
    assert [i.checkpoint_id for i in killed.list()] == ["t-0000"]  # nothing registered yet

    with caplog.at_level(logging.INFO, logger="trainer.train"):
        resumed = train_round(killed, "t-0000", [("b", [batch])], "t-0001", **options)
    assert resumed is not None
    assert any("resuming round t-0001" in r.getMessage() for r in caplog.records)
    assert resumed.stats.grad_steps == total_steps
    assert resumed.candidate.weights.sha256 == whole.candidate.weights.sha256
    assert not state.exists()  # the round's state is gone once its candidate is registered


def test_a_saved_state_of_other_inputs_is_discarded(registry, tmp_path, caplog):
    root = registry.get("t-0000")
    policy = load_policy(registry, root)
    first = write_batch(tmp_path / "a.parquet", serve(policy, root, 40, 1))
    state = registry.root / ".rounds" / "t-0001.pt"
    state.parent.mkdir(parents=True)
    torch.save({"key": "another round", "trainable": {}, "optimizer": {}, "progress": {}}, state)
    with caplog.at_level(logging.INFO, logger="trainer.train"):
        done = train_round(
            registry,
            "t-0000",
            [("a", [first])],
            "t-0001",
            round_options(registry, LEARNER, GateConfig()),
            alarms=[],
        )
    assert done is not None and not any("resuming" in r.getMessage() for r in caplog.records)
