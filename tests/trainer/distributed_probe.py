"""One training job under ``torchrun --nproc_per_node N`` on CPUs (gloo), for the distributed
test: ``python -m torch.distributed.run --nproc_per_node 2 -m
tests.trainer.distributed_probe REGISTRY BATCH OUT``. Each rank writes the hash of its weights
after an update, then a round runs that only rank 0 registers."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from accelerate import Accelerator

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from models.examples import read_examples
from release.gate import GateConfig
from tests.support.rounds import round_options
from trainer.learner import LearnerConfig, update
from trainer.train import train_round

LEARNER = LearnerConfig(lr=1e-3, epochs=2, minibatches=2, micro_batch=4, save_every=0)


def main(argv: list[str]) -> None:
    registry, batch, out = CheckpointRegistry(Path(argv[0])), Path(argv[1]), Path(argv[2])
    accelerator = Accelerator(cpu=True)
    policy = load_policy(registry, registry.get("t-0000"))
    result = update(policy, read_examples(batch).examples, LEARNER, accelerator)
    digest = hashlib.sha256()
    for name, p in sorted(policy.model.state_dict().items()):
        digest.update(name.encode() + p.detach().contiguous().numpy().tobytes())
    (out / f"rank{accelerator.process_index}.txt").write_text(
        f"{accelerator.num_processes} {result.stats.grad_steps} {digest.hexdigest()}"
    )
    train_round(
        registry,
        "t-0000",
        [("b", [batch])],
        "t-0001",
        round_options(registry, LEARNER, GateConfig(min_gain=-100, max_kl=100)),
        alarms=[],
        accelerator=accelerator,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
