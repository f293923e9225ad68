"""A backfill's report on disk: the comparison as CSV and JSON, the distributions as an SVG.

Apart from :mod:`rewards.backfill` (which computes and stays free of files and matplotlib) and
from :mod:`rewards.backfill_plot` (which draws), so that neither imports the other.
"""

from __future__ import annotations

import json
from pathlib import Path

from rewards.backfill import Backfill
from rewards.backfill_plot import plot_backfill


def write_report(result: Backfill, out_dir: str | Path) -> list[Path]:
    """The comparison as ``backfill.csv`` and ``backfill.json`` (with both versions named), and
    the distributions as ``backfill.svg`` (:mod:`rewards.backfill_plot`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / "backfill.csv", out / "backfill.json"
    result.comparison.write_csv(csv_path)
    document = {
        "old_version": result.old_version,
        "new_version": result.new_version,
        "checkpoints": result.comparison.to_dicts(),
    }
    json_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return [csv_path, json_path, plot_backfill(result, out / "backfill.svg")]
