"""`.rtrl/run/report.html`: one page that holds what `rtrl run` found and drew.

The page is static: its tables are rendered here from the run's summary (``summary.json``,
``rtrl.report.summary``: the rounds, the A/B test's changes as percentages with their intervals and
p-values, the cycle times, the checkpoint lineage with each decision's reasons), its plots are
the run's own SVG files beside it. A small script marks each plot once the browser has decoded
it (``data-loaded``), so that a headless browser can tell a page whose plots all loaded from one
with a broken image (``tests/rtrl/test_run_loop.py`` opens it in Chromium).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rtrl.report.summary import AbTest, RunSummary


@dataclass(frozen=True)
class Plot:
    title: str
    file: str  # relative to the page
    caption: str


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.6rem; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
figure { margin: 1.5rem 0; } img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9rem; }
"""

_MARK_LOADED = """
window.addEventListener("load", () => {
  for (const img of document.querySelectorAll("img.plot")) {
    img.dataset.loaded = String(img.complete && img.naturalWidth > 0);
  }
  document.body.dataset.ready = "true";
});
"""


def _cell(value: object) -> str:
    if value is None:
        return "<td>-</td>"
    if isinstance(value, Text):
        return f"<td>{html.escape(value)}</td>"
    if isinstance(value, float):
        return f"<td>{value:+.3f}</td>" if value < 0 else f"<td>{value:.3f}</td>"
    text = html.escape(str(value))
    return f'<td class="text">{text}</td>' if not isinstance(value, int) else f"<td>{text}</td>"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """
    >>> table(["a", "b"], [[1, "x<y"]])
    '<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td class="text">x&lt;y</td></tr></table>'
    """
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class Text(str):
    """A cell already formatted (a percentage, a p-value): shown as it is, right-aligned."""


def percent(change: float | None) -> Text:
    """A relative change as a signed percentage.

    >>> percent(0.02283), percent(-0.1), percent(None)
    ('+2.28 %', '-10.00 %', '-')
    """
    return Text("-" if change is None else f"{change * 100:+.2f} %")


def p_value(p: float | None) -> Text:
    """
    >>> p_value(3e-9), p_value(0.0001), p_value(0.04213), p_value(None)
    ('< 0.0001', '0.0001', '0.0421', '-')
    """
    if p is None:
        return Text("-")
    return Text("< 0.0001" if p < 0.0001 else f"{p:.4f}")


def ab_table(test: AbTest) -> str:
    return table(
        ["metric", f"control ({test.control_arm})", f"treatment ({test.treatment_arm})",
         "change", "95 % CI", "p"],
        [[m.label, m.control, m.treatment, percent(m.change),
          Text("-" if m.ci_low is None or m.ci_high is None
               else f"[{percent(m.ci_low)}, {percent(m.ci_high)}]"),
          p_value(m.p)] for m in test.metrics],
    )  # fmt: skip


def render(title: str, summary: RunSummary, plots: Sequence[Plot]) -> str:
    rounds = summary.rounds
    verdicts = {c.checkpoint_id: c for c in summary.checkpoints}
    gate = [verdicts[r.candidate].status if r.candidate in verdicts else "-" for r in rounds]
    if summary.world == "code":
        cycle_table = table(
            ["round", "served by", "users", "code passing hidden tests", "edits kept",
             "dissatisfied follow-ups", "held-out pass rate", "mean reward",
             "candidate trained on it", "gate"],
            [[r.round, r.served_by, r.users, r.pass_share, r.edits_kept_share,
              r.dissatisfied_share, r.held_out_pass_rate, r.mean_reward, r.candidate or "-", g]
             for r, g in zip(rounds, gate, strict=True)],
        )  # fmt: skip
    elif summary.world == "agent":
        cycle_table = table(
            ["round", "served by", "users", "tasks solved", "edits kept",
             "broken tool calls (of all calls)", "tool calls", "dissatisfied follow-ups",
             "mean reward", "candidate trained on it", "gate"],
            [[r.round, r.served_by, r.users, r.pass_share, r.edits_kept_share,
              r.broken_tool_call_share, r.tool_calls, r.dissatisfied_share, r.mean_reward,
              r.candidate or "-", g] for r, g in zip(rounds, gate, strict=True)],
        )  # fmt: skip
    else:
        cycle_table = table(
            ["round", "served by", "users", "accepted", "invalid tool calls", "questions",
             "taste", "mean reward", "candidate trained on it", "gate"],
            [[r.round, r.served_by, r.users, r.accepted_share, r.invalid_tool_call_share,
              r.question_share, r.taste, r.mean_reward, r.candidate or "-", g]
             for r, g in zip(rounds, gate, strict=True)],
        )  # fmt: skip
    times = table(
        ["cycle", *summary.stage_names, "total"],
        [[c.cycle, *(c.stages.get(s) for s in summary.stage_names), c.total_s]
         for c in summary.cycles],
    )  # fmt: skip
    if summary.world == "code":
        lineage = table(
            ["checkpoint", "parent", "decision", "held-out pass rate", "reasons"],
            [[c.checkpoint_id, c.parent or "-", c.status, c.held_out_pass_rate,
              "; ".join(c.reasons) or "-"] for c in summary.checkpoints],
        )  # fmt: skip
    else:
        lineage = table(
            ["checkpoint", "parent", "decision", "reasons"],
            [[c.checkpoint_id, c.parent or "-", c.status, "; ".join(c.reasons) or "-"]
             for c in summary.checkpoints],
        )  # fmt: skip
    promoted = sum(c.status == "promoted" for c in summary.checkpoints)
    gated = sum(c.status != "root" for c in summary.checkpoints)
    intro = (f"{len(rounds)} training rounds, {sum(r.users for r in rounds)} simulated users "
             f"served; {promoted} of {gated} candidates promoted.")  # fmt: skip
    ab = (
        "".join(
            f"<h3>{html.escape(t.experiment)}: {html.escape(t.treatment_arm)} against "
            f"{html.escape(t.control_arm)}{' (the closing test)' if t.closing else ''}, "
            f"{t.n_users} users in the treatment arm</h3>{ab_table(t)}"
            for t in summary.ab
        )
        or "<p>no A/B test</p>"
    )
    figures = "".join(
        f'<figure><img class="plot" src="{html.escape(p.file)}" alt="{html.escape(p.title)}">'
        f"<figcaption><b>{html.escape(p.title)}</b>: {html.escape(p.caption)}</figcaption>"
        "</figure>"
        for p in plots
    )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}"
        f"</title><style>{_STYLE}</style><script>{_MARK_LOADED}</script></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(intro)}</p>"
        f"<h2>Training rounds</h2>{cycle_table}"
        f"<h2>A/B report</h2>{ab}"
        f"<h2>Cycle time (s, wall)</h2>{times}"
        f"<h2>Checkpoint lineage</h2>{lineage}"
        f"<h2>Plots</h2>{figures}</body></html>\n"
    )


def write(path: Path, page: str) -> Path:
    """Write the page atomically (a reader never sees half of it)."""
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
