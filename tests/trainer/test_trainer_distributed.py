"""Training under several processes (``torchrun``/``accelerate launch``; gloo on CPUs here,
NCCL on GPUs): every rank trains its shard with gradients averaged, so all ranks end with the
same weights in half the steps, and only rank 0 registers the candidate."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from checkpoints.weights import load_policy
from tests.support.checkpoints import serve, write_batch
from tests.support.kafka import free_port_block

pytestmark = pytest.mark.slow


def test_two_processes_train_their_shards_to_the_same_weights_and_register_once(registry, tmp_path):
    root = registry.get("t-0000")
    examples = serve(load_policy(registry, root), root, 40, seed=0)
    batch = write_batch(tmp_path / "b.parquet", examples)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--master_port", str(free_port_block(1)), "-m", "tests.trainer.distributed_probe",
         str(registry.root), str(batch), str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=300)
    finally:  # the launcher's workers too, whatever happened
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]
    ranks = [(tmp_path / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert [r[0] for r in ranks] == ["2", "2"]  # each saw a world of two
    steps = 2 * 2  # 2 epochs of 2 minibatches of whole runs (20 of the 40 a rank)
    assert [int(r[1]) for r in ranks] == [steps, steps]
    assert ranks[0][2] == ranks[1][2]  # gradients were averaged: the same weights everywhere
    infos = registry.list()
    assert [i.checkpoint_id for i in infos] == ["t-0000", "t-0001"]
    assert infos[1].evals["processes"] == 2
