"""The report page in headless Chromium: a plot that loads is marked loaded, a missing one is
not, and the tables are there (the whole run's page is checked in tests/rtrl/test_run_loop.py)."""

from __future__ import annotations

from matplotlib.figure import Figure

from rewards.figures import save_figure
from rtrl.report.page import Plot, render, write
from rtrl.report.summary import Checkpoint, Round, RunSummary
from tests.rtrl.browser import page_facts, rendered_dom


def test_the_browser_tells_a_loaded_plot_from_a_missing_one(tmp_path):
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot([1, 2, 3], [1, 4, 9])
    save_figure(fig, tmp_path / "ok.svg")
    cycle = Round(round=1, served_by="tiny-0000", users=600, accepted_share=0.27,
                  invalid_tool_call_share=0.12, question_share=0.0, taste=0.25,
                  mean_reward=-0.183, candidate="tiny-0001")  # fmt: skip
    lineage = [Checkpoint(checkpoint_id="tiny-0000", parent=None, status="root", reasons=[]),
               Checkpoint(checkpoint_id="tiny-0001", parent="tiny-0000", status="rejected",
                          reasons=["<b>"])]  # fmt: skip
    summary = RunSummary(rounds=[cycle], checkpoints=lineage, ab=[], cycles=[], stage_names=[])
    page = render(
        "a run",
        summary,
        [Plot("works", "ok.svg", "a line"), Plot("broken", "missing.svg", "no file")],
    )
    dom = rendered_dom(write(tmp_path / "report.html", page), tmp_path / "profile")
    facts = page_facts(dom)
    assert facts.body.get("data-ready") == "true"
    assert facts.plots == {"ok.svg": "true", "missing.svg": "false"}
    assert "tiny-0001" in facts.tables[0] and "rejected" in facts.tables[0]
    assert "<b>" in facts.tables[-1]  # escaped text
