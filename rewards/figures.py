"""How the platform saves a figure: SVG by default, text kept as text (searchable, testable),
no date in the file, so the same input gives the same bytes; any other format matplotlib knows
by the file's suffix (``.png``, ``.pdf``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib import rc_context
from matplotlib.figure import Figure


def save_figure(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    kind = out.suffix.lstrip(".").lower() or "svg"
    with rc_context({"svg.fonttype": "none"}):
        fig.savefig(out, format=kind, metadata={"Date": None} if kind == "svg" else None)
    return out
