"""Backfill: recompute records under two reward versions; show how each checkpoint's reward moves.

Before a new reward version replaces the old one, its effect must be visible per checkpoint: a
version that quietly favours one checkpoint would change which one ships. Both versions are
computed from the same events in one pass (:func:`rewards.replay.replay_many`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from rewards.config import RewardConfig
from rewards.eventio import read_events
from rewards.record import CENSORED
from rewards.replay import Progress, replay_many

ALL_CHECKPOINTS = "(all)"
STATS = ("mean", "p10", "p50", "p90", "censored_share")


@dataclass(frozen=True)
class Backfill:
    """Both versions' records and their per-checkpoint comparison."""

    old_version: str
    new_version: str
    old_records: pl.DataFrame
    new_records: pl.DataFrame
    comparison: pl.DataFrame


def summarise(records: pl.DataFrame) -> pl.DataFrame:
    """Per checkpoint (and over all): n, n_scored, mean/p10/p50/p90 of the reward, censored share.

    Quantiles interpolate linearly over scored records; censored ones have no reward.
    """
    reward = pl.col("reward")
    stats = [
        pl.len().alias("n"),
        reward.is_not_null().sum().alias("n_scored"),
        reward.mean().alias("mean"),
        reward.quantile(0.1, interpolation="linear").alias("p10"),
        reward.quantile(0.5, interpolation="linear").alias("p50"),
        reward.quantile(0.9, interpolation="linear").alias("p90"),
        (pl.col("status") == CENSORED).mean().alias("censored_share"),
    ]
    keyed = records.with_columns(pl.col("checkpoint_id").fill_null("(none)"))
    per_checkpoint = keyed.group_by("checkpoint_id").agg(stats).sort("checkpoint_id")
    overall = keyed.select(pl.lit(ALL_CHECKPOINTS).alias("checkpoint_id"), *stats)
    return pl.concat([per_checkpoint, overall], how="vertical_relaxed")


def compare_summaries(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """old_*, new_* and delta_* (new - old) of every statistic, one row per checkpoint."""
    joined = old.join(
        new, on="checkpoint_id", how="full", coalesce=True, suffix="_new", maintain_order="left"
    )
    columns = [
        pl.col("checkpoint_id"),
        pl.col("n"),
        pl.col("n_scored").alias("old_n_scored"),
        pl.col("n_scored_new").alias("new_n_scored"),
    ]
    for stat in STATS:
        columns += [
            pl.col(stat).alias(f"old_{stat}"),
            pl.col(f"{stat}_new").alias(f"new_{stat}"),
            (pl.col(f"{stat}_new") - pl.col(stat)).alias(f"delta_{stat}"),
        ]
    return joined.select(columns)


def run_backfill(
    events: pl.DataFrame,
    old_config: RewardConfig,
    new_config: RewardConfig,
    progress: Progress | None = None,
) -> Backfill:
    """Recompute every interaction of ``events`` under both configs and compare them."""
    old_records, new_records = replay_many(events, [old_config, new_config], progress)
    comparison = compare_summaries(summarise(old_records), summarise(new_records))
    return Backfill(old_config.reward_version, new_config.reward_version, old_records,
                    new_records, comparison)  # fmt: skip


def backfill_files(
    paths: Sequence[str | Path],
    old_config: RewardConfig,
    new_config: RewardConfig,
    progress: Progress | None = None,
) -> Backfill:
    """:func:`run_backfill` over event files (JSON lines, Parquet); the warehouse passes its own."""
    return run_backfill(read_events(paths), old_config, new_config, progress)


def format_table(result: Backfill) -> str:
    """A fixed-width table: per checkpoint, old -> new (delta) of every statistic."""
    header = f"{'checkpoint':<16}{'n':>9}  " + "".join(f"{s:>28}" for s in STATS)
    lines = [f"reward {result.old_version} -> {result.new_version}", header]
    for row in result.comparison.iter_rows(named=True):
        cells = []
        for stat in STATS:
            old, new, delta = row[f"old_{stat}"], row[f"new_{stat}"], row[f"delta_{stat}"]
            cells.append(f"{_num(old)} -> {_num(new)} ({_num(delta, signed=True)})".rjust(28))
        lines.append(f"{row['checkpoint_id']:<16}{row['n'] or 0:>9}  " + "".join(cells))
    return "\n".join(lines)


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"
