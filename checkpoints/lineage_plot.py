"""A registry's checkpoints as a picture: the reward each served checkpoint earned (mean and 95 %
CI over its scored interactions, from the ``rewards`` mart), beside what the gate estimated for it
before it served anyone. A reader sees at once whether training helps, and whether the gate's
off-policy estimates can be trusted; rejected candidates appear as crosses at their estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from matplotlib.figure import Figure

from checkpoints.record import PROMOTED, CheckpointInfo
from rewards.figures import save_figure


@dataclass(frozen=True)
class Measured:
    mean: float
    half_width: float  # of the 95 % normal interval
    n: int


def measured_rewards(records: pl.DataFrame) -> dict[str, Measured]:
    """Per checkpoint, the mean reward of its scored records (latest revisions expected).

    >>> frame = pl.DataFrame({"checkpoint_id": ["a", "a", "b"], "status": ["scored"] * 3,
    ...                       "reward": [1.0, 0.0, 2.0]})
    >>> m = measured_rewards(frame)
    >>> m["a"].mean, m["a"].n, round(m["a"].half_width, 3), m["b"].half_width
    (0.5, 2, 0.98, 0.0)
    """
    scored = (
        records.filter(pl.col("status") == "scored")
        .group_by("checkpoint_id")
        .agg(
            pl.col("reward").mean().alias("mean"),
            pl.col("reward").std(ddof=1).alias("sd"),
            pl.len().alias("n"),
        )
    )
    out = {}
    for row in scored.iter_rows(named=True):
        sd = row["sd"] if row["sd"] is not None and math.isfinite(row["sd"]) else 0.0
        out[row["checkpoint_id"]] = Measured(row["mean"], 1.96 * sd / math.sqrt(row["n"]), row["n"])
    return out


def plot_lineage(infos: Sequence[CheckpointInfo], measured: dict[str, Measured],
                 path: str | Path) -> Path:  # fmt: skip
    """One column per checkpoint in registration order."""
    fig = Figure(figsize=(max(4.0, 1.1 * len(infos) + 2), 3.6))
    ax = fig.add_subplot()
    for x, info in enumerate(infos):
        got = measured.get(info.checkpoint_id)
        if got is not None:
            ax.errorbar(
                [x],
                [got.mean],
                yerr=[got.half_width],
                fmt="o",
                color="tab:blue",
                capsize=4,
                label="measured (95 % CI)" if x == 0 else None,
            )
        estimate = info.evals.get("gate", {}).get("value")
        if isinstance(estimate, int | float) and math.isfinite(estimate):
            promoted = info.status == PROMOTED
            ax.plot(
                [x],
                [estimate],
                "o" if promoted else "x",
                mfc="none",
                color="tab:orange" if promoted else "tab:red",
                label="gate's estimate" if promoted else "rejected: estimate",
            )
    ax.set_xticks(range(len(infos)), [i.checkpoint_id for i in infos], rotation=30, ha="right")
    ax.set_ylabel("mean reward")
    ax.set_title("reward by checkpoint")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)
