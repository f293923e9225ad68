"""The monitors' alarms of a served checkpoint, judged once a round: each round is a look.

``rtrl train`` judges its served checkpoint against that one's parent every time it trains a
candidate from it, on more data each time. ``trainer.inputs.alarms_of`` passes the look, so the
stated alpha holds over all the looks at one pair (``stats.multiple.look_alpha``)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from checkpoints.record import PROMOTED, TrainingRef, WeightsRef
from checkpoints.store import CheckpointRegistry
from rewards.monitors import MonitorThresholds
from trainer.inputs import alarms_of


def records(checkpoint: str, users: int, invalid: int) -> pl.DataFrame:
    """Two interactions per user; the first ``invalid`` interactions carry a broken call."""
    n = 2 * users
    return pl.DataFrame({
        "interaction_id": [f"{checkpoint}-{i}" for i in range(n)],
        "org_id": ["org"] * n,
        "user_id": [f"u{i // 2}" for i in range(n)],
        "session_id": [f"s{i}" for i in range(n)],
        "revision": [0] * n,
        "checkpoint_id": [checkpoint] * n,
        "status": ["scored"] * n,
        "n_edits": [0] * n,
        "n_clarifying": [0] * n,
        "n_invalid_tool_calls": [1 if i < invalid else 0 for i in range(n)],
        "n_subagents": [0] * n,
        "n_subagents_unused": [0] * n,
    })  # fmt: skip


def catalog_with(path: Path, frame: pl.DataFrame) -> Path:
    with duckdb.connect(str(path)) as con:
        con.register("frame", frame.to_arrow())
        con.execute("CREATE TABLE rewards AS SELECT * FROM frame")
    return path


def test_a_later_look_needs_more_evidence_than_the_first(
    registry: CheckpointRegistry, tmp_path: Path
) -> None:
    root = registry.get("t-0000")
    registry.register(checkpoint_id="t-0001", parent="t-0000", model=root.model,
                      weights=WeightsRef(kind="base"), training=TrainingRef(), files={},
                      evals={}, batches=(), status=PROMOTED)  # fmt: skip
    parent = records("t-0000", users=200, invalid=40)
    thresholds = tmp_path / "thresholds.toml"
    thresholds.write_text("[monitors.invalid_tool_call_rate]\nrelative = 0.0\nabsolute = 0.0\n")
    # the child's broken calls grow until the first look alarms: a borderline excess
    for invalid in range(40, 400, 2):
        catalog = catalog_with(tmp_path / f"c{invalid}.duckdb",
                               pl.concat([records("t-0001", 200, invalid), parent]))  # fmt: skip
        first = alarms_of(catalog, registry, "t-0001", thresholds, look=1)
        if first:
            break
    assert [a.metric for a in first] == ["invalid_tool_call_rate"]
    # the same data at the tenth look: its alpha is a hundredth of the first's, no alarm
    assert alarms_of(catalog, registry, "t-0001", thresholds, look=10) == []
    assert MonitorThresholds().alpha > 0
