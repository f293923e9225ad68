"""``rtrl report ab --plot FILE``: each treatment's relative change per metric, with its 95 % CI.

A forest plot: one line per (arm, metric), the point at the relative change, the bar its
confidence interval, the vertical line at no change. Whether a bar crosses zero is what a reader
looks for first, and it is quicker seen than read off a table.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from rewards.figures import save_figure
from warehouse.report import METRICS, ReportRow


def plot_ab(rows: list[ReportRow], path: str | Path) -> Path:
    """Write the forest plot (SVG unless the suffix says otherwise); metrics without an
    estimate are listed with "no estimate"."""
    if not rows:
        raise ValueError("no treatment arm to plot")
    first = rows[0]
    fig = Figure(figsize=(8, 0.45 * len(rows) + 1.6), layout="constrained")
    ax = fig.subplots()
    labels = []
    for y, row in enumerate(reversed(rows)):
        labels.append(f"{METRICS[row.metric][0]}  [{row.arm}]")
        if row.relative_change is None:
            ax.text(0, y, "no estimate", va="center", ha="center", fontsize=8, color="grey")
            continue
        change = 100 * row.relative_change
        if row.ci_low is not None and row.ci_high is not None:
            low, high = 100 * row.ci_low, 100 * row.ci_high
            crosses = low <= 0 <= high
            ax.errorbar(
                change,
                y,
                xerr=[[change - low], [high - change]],
                fmt="o",
                capsize=3,
                color="grey" if crosses else "tab:blue",
            )
        else:
            ax.plot(change, y, "o", color="grey")
        ax.annotate(
            f"{change:+.2f} %",
            (change, y),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"change vs {first.control_arm} (%), 95 % CI; grey: the interval holds 0")
    ax.set_title(f"experiment {first.experiment}", fontsize=10)
    return save_figure(fig, path)
