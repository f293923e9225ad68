"""`.rtrl/run/report.html`: one page that holds what `rtrl run` printed and drew.

The page is static: its tables are rendered here, its plots are the run's own SVG files beside
it. A small script marks each plot once the browser has decoded it (``data-loaded``), so that a
headless browser can tell a page whose plots all loaded from one with a broken image
(``tests/rtrl/test_run_loop.py`` opens it in Chromium).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CycleRow:
    """One training round as the page shows it."""

    round: int
    served_by: str
    users: int
    acceptance: float
    invalid_rate: float
    taste: float  # the simulated users' hidden taste of the served policy
    mean_reward: float | None  # what the platform measured (the rewards mart)
    candidate: str  # the checkpoint trained on this round's data, and the gate's word on it
    decision: str
    clarifying_rate: float = 0.0  # questions instead of an edit (the agent users ask)


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


def render(title: str, summary: str, cycles: Sequence[CycleRow], ab_header: Sequence[str],
           ab_rows: Sequence[Sequence[object]], plots: Sequence[Plot]) -> str:  # fmt: skip
    cycle_table = table(
        ["round", "served by", "users", "accepted", "invalid tool calls", "questions", "taste",
         "mean reward", "candidate trained on it", "gate"],
        [[c.round, c.served_by, c.users, c.acceptance, c.invalid_rate, c.clarifying_rate,
          c.taste, c.mean_reward, c.candidate, c.decision] for c in cycles],
    )  # fmt: skip
    figures = "".join(
        f'<figure><img class="plot" src="{html.escape(p.file)}" alt="{html.escape(p.title)}">'
        f"<figcaption><b>{html.escape(p.title)}</b>: {html.escape(p.caption)}</figcaption>"
        "</figure>"
        for p in plots
    )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}"
        f"</title><style>{_STYLE}</style><script>{_MARK_LOADED}</script></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p>"
        f"<h2>Training rounds</h2>{cycle_table}"
        f"<h2>A/B report</h2>{table(ab_header, ab_rows)}"
        f"<h2>Plots</h2>{figures}</body></html>\n"
    )


def write(path: Path, page: str) -> Path:
    """Write the page atomically (a reader never sees half of it)."""
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
