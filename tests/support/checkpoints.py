"""Checkpoints and rollouts for the tests of every stage that stands on the model layer
(trainer, release, serving, models, checkpoints, rtrl): checkpoints with other weights than the
tiny model's, rollouts served by a checkpoint with rewards from a hidden taste, and those
rollouts as a warehouse batch. The tiny model and a registry rooted at it are fixtures in
``tests/conftest.py``."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from checkpoints.record import CheckpointInfo, TrainingRef
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, weight_writers
from models.examples import Example
from models.policy import CausalLMPolicy
from models.rollout import Rollout
from models.sampling import SamplingParams

TS = "2026-11-30T10:00:00.000000Z"
PARAMS = SamplingParams(max_tokens=6)
TASKS = ("slugify(s)", "reverse(xs)", "count_words(text)", "is_prime(n)", "mean(xs)")


def register_variant(registry: CheckpointRegistry, checkpoint_id: str, parent: str | None,
                     seed: int, status: str = "promoted", reasons: tuple[str, ...] = (),
                     batches: tuple[str, ...] = (), evals: dict | None = None,
                     org_id: str | None = None) -> CheckpointInfo:  # fmt: skip
    """A full-weights checkpoint whose weights are the root's plus seeded noise."""
    root = registry.list()[0]
    policy = load_policy(registry, root)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    weights, files = weight_writers(policy, None, None)
    return registry.register(
        checkpoint_id=checkpoint_id,
        parent=parent,
        model=root.model,
        weights=weights,
        training=TrainingRef(),
        files=files,
        evals=evals or {},
        batches=batches,
        status=status,
        reasons=reasons,
        org_id=org_id,
    )


def low_token_share(policy: CausalLMPolicy, ids: tuple[int, ...]) -> float:
    """The hidden taste: the share of a completion's tokens in the vocabulary's lowest quarter."""
    return sum(t < policy.vocab_size // 4 for t in ids) / len(ids)


def serve(policy: CausalLMPolicy, info: CheckpointInfo, n: int, seed: int,
          params: SamplingParams = PARAMS, prefix: str = "i",
          group: int = 4) -> list[Example]:  # fmt: skip
    """``n`` interactions served by ``info``'s policy (``group`` completions per prompt: the
    learner compares a run only with the other runs of its prompt, so a prompt alone gives no
    signal), each rewarded 1 with the chance of its low-token share, else -0.5."""
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    prompts: list[list[int]] = []
    while len(prompts) < n:
        task = rng.choice(TASKS)
        ask = f"Write `{task}` #{rng.randrange(99)}."
        prompt = policy.chat_prompt([{"role": "user", "content": ask}])
        prompts.extend([prompt] * group)
    prompts = prompts[:n]
    examples = []
    for start in range(0, n, 32):
        chunk = prompts[start : start + 32]
        for k, (prompt, done) in enumerate(
            zip(chunk, policy.sample(chunk, params, generator), strict=True)
        ):
            reward = 1.0 if rng.random() < low_token_share(policy, done.token_ids) else -0.5
            rollout = Rollout(
                f"{prefix}-{seed}-{start + k}",
                info.checkpoint_id,
                info.model.identity(),
                params,
                tuple(prompt),
                done.token_ids,
                done.logprobs,
                done.finish_reason,
                TS,
            )
            examples.append(Example(rollout, reward))
    return examples


def write_batch(path: Path, examples: list[Example], batch_id: str = "b") -> Path:
    """The examples as a warehouse batch file (the rows the trainer reads)."""
    import polars as pl

    from warehouse.manifest import BATCH_DATA_SCHEMA

    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    rows = [
        {
            **base,
            "batch_id": batch_id,
            "interaction_id": e.rollout.interaction_id,
            "checkpoint_id": e.rollout.checkpoint_id,
            "status": "scored",
            "reward": e.reward,
            "rollout_json": e.rollout.to_json().decode(),
        }
        for e in examples
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows, schema=BATCH_DATA_SCHEMA).write_parquet(path)
    return path


def offer_batch(warehouse: Path, bootstrap: str, topic: str, registry: CheckpointRegistry,
                checkpoint: str, n: int, seed: int) -> str:  # fmt: skip
    """Serve ``n`` interactions with ``checkpoint``, reward the low tokens, write and announce
    the batch on ``topic`` as the warehouse does; the batch's id."""
    from datetime import UTC, datetime

    from warehouse.batches import publish
    from warehouse.manifest import BatchEntry

    info = registry.get(checkpoint)
    examples = serve(load_policy(registry, info), info, n, seed=seed)
    batch = f"{checkpoint}-b{seed}"
    relative = f"_batches/data/{batch}.parquet"
    write_batch(warehouse / relative, examples, batch)
    entry = BatchEntry(batch, checkpoint, "v", n, (relative,), "passed", True, datetime.now(UTC))
    publish(bootstrap, topic, [entry])
    return batch
