"""Training examples: a rollout and the reward its interaction earned, read from a batch file.

A batch (``warehouse.batches``) is one Parquet file of scored reward records of one checkpoint,
each row with the rollout the serving side published for its interaction (``rollout_json``, null
when none was sunk). An example needs both: rows without a rollout, or whose rollout came from
another checkpoint than the batch's, are left out and counted, never guessed. The user and
session of each interaction come along (null when the record has none): the gate holds out and
resamples whole users. A rollout decoded under a constraint carries it (``rollout.constraint``),
for scoring to replay; one this process cannot replay (another grammar library or version) is
left out and counted here, before any scoring pass would refuse it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from models.constraint import NOT_REPLAYABLE, unreplayable_reason
from models.rollout import Rollout, RolloutError


@dataclass(frozen=True)
class Example:
    rollout: Rollout
    reward: float
    user_id: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class BatchExamples:
    checkpoint_id: str
    examples: list[Example]
    skipped: Counter[str]
    """Rows left out, by reason: no_rollout, no_reward, bad_rollout, old_rollout_version,
    other_interaction (the rollout names another interaction), other_checkpoint (it was served
    by another one), constraint_not_replayable (decoded under a grammar this process cannot
    replay)."""


def read_examples(path: str | Path) -> BatchExamples:
    """The examples of one batch file (all its rows share one checkpoint)."""
    present = pl.read_parquet_schema(path)
    wanted = ["interaction_id", "checkpoint_id", "reward", "rollout_json", "user_id", "session_id"]
    frame = pl.read_parquet(path, columns=[name for name in wanted if name in present])
    for name in ("user_id", "session_id"):  # batches of older writers may lack them
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(name))
    checkpoints = frame["checkpoint_id"].unique().to_list()
    if len(checkpoints) != 1:
        found = sorted(map(str, checkpoints))
        raise ValueError(f"{path}: a batch holds one checkpoint, found {found}")
    checkpoint = str(checkpoints[0])
    examples: list[Example] = []
    skipped: Counter[str] = Counter()
    columns = ("interaction_id", "reward", "rollout_json", "user_id", "session_id")
    for interaction_id, reward, raw, user_id, session_id in frame.select(columns).iter_rows():
        if raw is None:
            skipped["no_rollout"] += 1
            continue
        if reward is None:
            skipped["no_reward"] += 1
            continue
        try:
            rollout = Rollout.from_json(raw)
        except RolloutError as exc:
            skipped[exc.reason] += 1
            continue
        if rollout.interaction_id != interaction_id:
            skipped["other_interaction"] += 1
            continue
        if rollout.checkpoint_id != checkpoint:
            skipped["other_checkpoint"] += 1
            continue
        if rollout.constraint is not None and unreplayable_reason(rollout.constraint):
            skipped[NOT_REPLAYABLE] += 1
            continue
        examples.append(Example(rollout, float(reward), user_id, session_id))
    return BatchExamples(checkpoint, examples, skipped)
