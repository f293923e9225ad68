"""The report page in headless Chromium: a plot that loads is marked loaded, a missing one is
not, and the tables are there (the whole run's page is checked in tests/rtrl/test_run_loop.py)."""

from __future__ import annotations

from matplotlib.figure import Figure

from rewards.figures import save_figure
from rtrl.report_page import CycleRow, Plot, render, write
from tests.rtrl.browser import page_facts, rendered_dom


def test_the_browser_tells_a_loaded_plot_from_a_missing_one(tmp_path):
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot([1, 2, 3], [1, 4, 9])
    save_figure(fig, tmp_path / "ok.svg")
    cycle = CycleRow(1, "tiny-0000", 600, 0.27, 0.12, 0.25, -0.183, "tiny-0001", "rejected: <b>")
    page = render(
        "a run",
        "one round",
        [cycle],
        ["arm", "metric"],
        [["treatment", "mean reward"]],
        [Plot("works", "ok.svg", "a line"), Plot("broken", "missing.svg", "no file")],
    )
    dom = rendered_dom(write(tmp_path / "report.html", page), tmp_path / "profile")
    facts = page_facts(dom)
    assert facts.body.get("data-ready") == "true"
    assert facts.plots == {"ok.svg": "true", "missing.svg": "false"}
    assert "tiny-0001" in facts.tables[0] and "rejected: <b>" in facts.tables[0]  # escaped text
    assert "mean reward" in facts.tables[1]
