"""``backfill.svg``: each checkpoint's reward distribution under the old and the new version.

The table gives a few quantiles; the plot shows where the mass moved. A version that reshuffles
rewards within one checkpoint (say, fewer near 0, more near 1) shows plainly here and barely in
a mean. One panel per checkpoint (the busiest ones first, all checkpoints together first of all),
the same bins everywhere so that panels compare.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from matplotlib.figure import Figure

from rewards.backfill import ALL_CHECKPOINTS, Backfill
from rewards.figures import save_figure

BINS = 30
MAX_PANELS = 12
COLUMNS = 3


def _scored(records: pl.DataFrame, checkpoint: str) -> list[float]:
    rows = (
        records
        if checkpoint == ALL_CHECKPOINTS
        else records.filter(pl.col("checkpoint_id").fill_null("(none)") == checkpoint)
    )
    return rows["reward"].drop_nulls().to_list()


def plot_backfill(result: Backfill, path: str | Path) -> Path:
    """Write the panels (SVG unless the suffix says otherwise) and return the path."""
    comparison = result.comparison
    busiest = (
        comparison.filter(pl.col("checkpoint_id") != ALL_CHECKPOINTS)
        .sort(["n", "checkpoint_id"], descending=[True, False])["checkpoint_id"]
        .to_list()
    )
    panels = [ALL_CHECKPOINTS, *busiest[: MAX_PANELS - 1]]
    means = {row["checkpoint_id"]: row for row in comparison.iter_rows(named=True)}
    everything = [
        *_scored(result.old_records, ALL_CHECKPOINTS),
        *_scored(result.new_records, ALL_CHECKPOINTS),
    ]
    low, high = (min(everything), max(everything)) if everything else (0.0, 1.0)
    if low == high:
        low, high = low - 0.5, high + 0.5
    edges = [low + (high - low) * i / BINS for i in range(BINS + 1)]
    rows = -(-len(panels) // COLUMNS)
    fig = Figure(figsize=(4.2 * COLUMNS, 2.8 * rows + 0.8), layout="constrained")
    fig.suptitle(
        f"reward {result.old_version} (old) -> {result.new_version} (new): "
        "scored interactions per reward bin"
    )
    axes = fig.subplots(rows, COLUMNS, squeeze=False).ravel()
    for ax, checkpoint in zip(axes, panels, strict=False):
        old, new = _scored(result.old_records, checkpoint), _scored(result.new_records, checkpoint)
        ax.hist(old, bins=edges, histtype="stepfilled", alpha=0.35, label="old")
        ax.hist(new, bins=edges, histtype="step", linewidth=1.5, label="new")
        row = means.get(checkpoint, {})
        ax.set_title(
            f"{checkpoint}  n={row.get('n') or 0}\n"
            f"mean {_num(row.get('old_mean'))} -> {_num(row.get('new_mean'))}",
            fontsize=9,
        )
        ax.tick_params(labelsize=8)
        ax.set_xlabel("reward", fontsize=8)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=8)
    return save_figure(fig, path)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
