"""`summary.json` (``rtrl.report.summary``): the A/B report's rows under their stable names, every
gate decision with its reasons, and a document that reads back as it was written."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rtrl.report.summary import (
    SEED_METRICS,
    RunSummary,
    checkpoint,
    cycles,
    read_summary,
    write_summary,
)
from rtrl.report.write import ab_tests
from warehouse.ab_mart import METRICS
from warehouse.report import ReportRow


def _row(metric: str, change: float | None) -> ReportRow:
    low = None if change is None else change - 0.1
    high = None if change is None else change + 0.1
    return ReportRow("final-ab", "treatment", "control", metric, 40, 80, 0.5, 0.55, change,
                     low, high, 0.2, 0.4, low, high, 0.3, 0.6)  # fmt: skip


def test_the_summary_names_the_metrics_and_the_decisions_and_reads_back(tmp_path: Path) -> None:
    (ab,) = ab_tests("final-ab", True, [_row(m, 0.1) for m in METRICS])
    assert [m.name for m in ab.metrics] == list(METRICS)  # the warehouse's names, in order
    assert set(SEED_METRICS) <= set(METRICS)
    kept = ab.metric("kept_share")
    assert kept is not None and (kept.control, kept.treatment, kept.change) == (0.5, 0.55, 0.1)
    assert kept.label == "accepted edits still in the codebase"

    gate = {"gain": 0.031, "lower": 0.004, "level": 0.95, "kl": 0.1, "ess": 80.0, "n": 100.0,
            "method": "m", "value": float("nan")}  # fmt: skip
    lineage = [
        checkpoint("tiny-0000", None, "promoted", (), {}),
        checkpoint("tiny-0001", "tiny-0000", "rejected", ("ESS 12 of 100 below 20%",), gate),
        checkpoint("tiny-0002", "tiny-0000", "promoted", (), gate),
    ]
    assert [c.status for c in lineage] == ["root", "rejected", "promoted"]
    assert lineage[1].reasons == ["ESS 12 of 100 below 20%"]
    assert lineage[2].reasons[0].startswith("gain +0.031, its 95% lower bound +0.004")
    assert "value" not in lineage[2].gate  # NaN is not JSON: left out

    summary = RunSummary(rounds=[], checkpoints=lineage, ab=[ab],
                         cycles=cycles([{"serve": 2.0, "train": 30.0}]),
                         stage_names=["serve", "train"])  # fmt: skip
    assert summary.cycles[0].total_s == 32.0
    path = write_summary(tmp_path / "summary.json", summary)
    assert read_summary(path) == summary
    with pytest.raises(ValidationError):  # a misspelt field is refused, not ignored
        RunSummary.model_validate_json(path.read_text().replace('"cycles"', '"cycle_times"'))
