"""A retry after a rejection trains on the newest batches only (``--train-window``), while the
gate keeps every batch's held-out users as its evidence: rounds on one parent stop growing with
each attempt, and the evidence still accumulates."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy
from models.examples import Example
from tests.support.checkpoints import serve
from trainer.round_examples import read_round
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


def test_a_round_trains_on_its_newest_batches_and_is_judged_on_all(
    registry: CheckpointRegistry, three_batches: list[tuple[str, list[Path]]]
) -> None:
    parent = registry.get("t-0000")
    windowed = read_round(parent, three_batches, 0.3, train_window=2)
    every = read_round(parent, three_batches, 0.3, train_window=0)

    def batches(examples: list[Example], data=windowed) -> set[str]:  # noqa: ANN001
        return {data.batch_of[(e.org_id, e.rollout.interaction_id)] for e in examples}

    assert batches(windowed.train) == {"b1", "b2"}
    assert batches(windowed.held) == {"b0", "b1", "b2"}  # the evidence from every batch
    assert [e.rollout.interaction_id for e in windowed.held] == [
        e.rollout.interaction_id for e in every.held
    ]
    assert batches(every.train, every) == {"b0", "b1", "b2"}
    assert set(map(id, windowed.train)) <= set(map(id, windowed.examples))
