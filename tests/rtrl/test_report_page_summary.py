"""The report page renders the run's summary, as headless Chromium shows it: the A/B changes as
percentages with their intervals, small p-values as ``< 0.0001``, the cycle-time table and the
checkpoint lineage with each decision's reasons."""

from __future__ import annotations

from pathlib import Path

from rtrl.report.page import render, write
from rtrl.report.summary import AbTest, Checkpoint, Cycle, Metric, Round, RunSummary
from tests.rtrl.browser import page_facts, rendered_dom


def _summary() -> RunSummary:
    rounds = [Round(round=n, served_by=s, users=1000, accepted_share=0.27,
                    invalid_tool_call_share=0.12, question_share=0.0, taste=0.26,
                    mean_reward=-0.18, candidate=c)
              for n, s, c in ((1, "tiny-0000", "tiny-0001"), (2, "tiny-0000", "tiny-0002"),
                              (3, "tiny-0002", None))]  # fmt: skip
    lineage = [
        Checkpoint(checkpoint_id="tiny-0000", parent=None, status="root", reasons=[]),
        Checkpoint(checkpoint_id="tiny-0001", parent="tiny-0000", status="rejected",
                   reasons=["ESS 12 of 100 below 20%", "KL 0.300 above 0.200"]),
        Checkpoint(checkpoint_id="tiny-0002", parent="tiny-0000", status="promoted",
                   reasons=["gain +0.031, its 95% lower bound +0.004 above the minimum"]),
    ]  # fmt: skip
    metrics = [
        Metric(name="kept_share", label="accepted edits still in the codebase", control=0.31,
               treatment=0.3171, change=0.02283, ci_low=0.0102, ci_high=0.0354, p=3.2e-7),
        Metric(name="dissatisfied_rate", label="dissatisfied follow-ups", control=0.2,
               treatment=0.1937, change=-0.0313, ci_low=-0.09, ci_high=0.0274, p=0.2953),
        Metric(name="latency_mean_ms", label="latency, mean (ms)", control=None, treatment=412.0,
               change=None, ci_low=None, ci_high=None, p=None),
    ]  # fmt: skip
    ab = AbTest(experiment="final-ab", closing=True, control_arm="control",
                treatment_arm="treatment", n_users=500, n_interactions=1000,
                metrics=metrics)  # fmt: skip
    cycles = [Cycle(cycle=1, stages={"serve": 20.5, "settle": 38.0, "train": 31.25},
                    total_s=89.75)]  # fmt: skip
    return RunSummary(rounds=rounds, checkpoints=lineage, ab=[ab], cycles=cycles,
                      stage_names=["serve", "settle", "train"])  # fmt: skip


def _rows(table_text: str) -> str:
    return " ".join(table_text.split())


def test_the_page_shows_the_summary_as_a_person_reads_it(tmp_path: Path) -> None:
    page = write(tmp_path / "report.html", render("rtrl run", _summary(), []))
    facts = page_facts(rendered_dom(page, tmp_path / "profile"))
    assert facts.body.get("data-ready") == "true"
    rounds, ab, cycles, lineage = (_rows(t) for t in facts.tables)

    assert "2 tiny-0000 1000 0.270 0.120 0.000 0.260 -0.180 tiny-0002 promoted" in rounds
    assert "1 tiny-0000 1000 0.270 0.120 0.000 0.260 -0.180 tiny-0001 rejected" in rounds
    assert ("accepted edits still in the codebase 0.310 0.317 +2.28 % [+1.02 %, +3.54 %] "
            "< 0.0001") in ab  # fmt: skip
    assert "dissatisfied follow-ups 0.200 0.194 -3.13 % [-9.00 %, +2.74 %] 0.2953" in ab
    assert "latency, mean (ms) - 412.000 - - -" in ab  # nothing to compare: said so
    assert "cycle serve settle train total" in cycles
    assert "1 20.500 38.000 31.250 89.750" in cycles
    assert "tiny-0000 - root -" in lineage
    assert ("tiny-0001 tiny-0000 rejected ESS 12 of 100 below 20%; KL 0.300 above 0.200"
            in lineage)  # fmt: skip
    assert "tiny-0002 tiny-0000 promoted gain +0.031" in lineage
