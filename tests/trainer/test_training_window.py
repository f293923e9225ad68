"""A retry after a rejection trains on the new data and the last attempt's (``--train-window``,
counted in attempts), while the gate keeps every batch's held-out users as its evidence: rounds
on one parent stop growing with each attempt, and the evidence still accumulates."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from infra.topics import TopicNames
from models.examples import Example
from release.gate import GateConfig
from tests.support.checkpoints import serve
from trainer.learner import LearnerConfig
from trainer.round_examples import read_round
from trainer.round_options import RoundOptions
from trainer.service import _waiting_for
from trainer.trigger import evidence_of
from warehouse.manifest import BATCH_DATA_SCHEMA


def _batch(path: Path, batch_id: str, examples: list[Example]) -> Path:
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    rows = [{**base, "batch_id": batch_id, "interaction_id": e.rollout.interaction_id,
             "checkpoint_id": e.rollout.checkpoint_id, "status": "scored", "reward": e.reward,
             "rollout_json": e.rollout.to_json().decode(), "org_id": "acme",
             "user_id": f"{batch_id}-u{k % 12}", "session_id": None}
            for k, e in enumerate(examples)]  # fmt: skip
    pl.DataFrame(rows, schema=BATCH_DATA_SCHEMA).write_parquet(path)
    return path


@pytest.fixture
def three_batches(tmp_path: Path, registry: CheckpointRegistry) -> list[tuple[str, list[Path]]]:
    root = registry.get("t-0000")
    served = serve(load_policy(registry, root), root, 96, seed=5)
    return [(f"b{n}", [_batch(tmp_path / f"b{n}.parquet", f"b{n}", served[32 * n : 32 * n + 32])])
            for n in range(3)]  # fmt: skip


def test_a_first_attempt_trains_on_every_batch_a_retry_on_the_new_and_the_last_attempts(
    registry: CheckpointRegistry, three_batches: list[tuple[str, list[Path]]]
) -> None:
    """Broken once on purpose: with the window counted in batches (the newest two), the first
    attempt trained on b1 and b2 alone, a sliver of a round when a batch builder builds every
    few seconds, and this failed."""
    parent = registry.get("t-0000")
    first = read_round(parent, three_batches, 0.3, train_window=2)
    retry = read_round(parent, three_batches, 0.3, train_window=2,
                       attempts=[("b0",), ("b0", "b1")])  # fmt: skip
    every = read_round(parent, three_batches, 0.3, train_window=0,
                       attempts=[("b0",), ("b0", "b1")])  # fmt: skip

    def batches(examples: list[Example], data=retry) -> set[str]:  # noqa: ANN001
        return {data.batch_of[(e.org_id, e.rollout.interaction_id)] for e in examples}

    assert batches(first.train, first) == {"b0", "b1", "b2"}
    assert batches(retry.train) == {"b1", "b2"}  # b2 is new, b1 was new to the last attempt
    assert batches(retry.held) == {"b0", "b1", "b2"}  # the evidence from every batch
    assert [e.rollout.interaction_id for e in retry.held] == [
        e.rollout.interaction_id for e in every.held
    ]
    assert batches(every.train, every) == {"b0", "b1", "b2"}
    assert set(map(id, retry.train)) <= set(map(id, retry.examples))


def test_the_service_retries_once_the_new_batches_hold_the_gates_evidence(
    tmp_path: Path, registry: CheckpointRegistry, three_batches: list[tuple[str, list[Path]]]
) -> None:
    """After an attempt on b0 and b1, the service's retry waits until b2, the batch no attempt
    tried, holds the gate's minimum of held-out runs on its own; the evidence of all three
    would have let it start on b2's first few runs. Broken once on purpose: without the wait
    for new evidence, the retry started and this failed."""
    parent = registry.get("t-0000")
    tried: list[tuple[str, ...]] = [("b0", "b1")]
    new = evidence_of(read_round(parent, three_batches[2:], 0.3))
    assert new.runs < evidence_of(read_round(parent, three_batches, 0.3)).runs

    def waits(min_runs: int, attempts: list[tuple[str, ...]]) -> str | None:
        gate = GateConfig(eval_prompts=0, min_examples=min_runs, min_users=1)
        options = RoundOptions(registry=registry.root, warehouse=tmp_path,
                               bootstrap="unused:9092", topics=TopicNames(),
                               learner=LearnerConfig(), gate=gate)  # fmt: skip
        return _waiting_for(parent, three_batches, options, attempts)[0]

    assert waits(new.runs, tried) is None
    short = waits(new.runs + 1, tried)
    assert short is not None and short.startswith("since the last attempt:"), short
    assert waits(new.runs + 1, []) is None  # a first attempt: every batch's evidence counts
