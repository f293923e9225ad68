"""A page as headless Chromium sees it: the DOM after every script ran (Debian's `chromium`,
installed by `scripts/bootstrap`)."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no chromium on PATH: scripts/bootstrap installs Debian's chromium")


def rendered_dom(page: Path, profile: Path, budget_ms: int = 10_000) -> str:
    """The DOM of ``page`` once it loaded (``--dump-dom`` waits for the load event and then for
    ``budget_ms`` of virtual time)."""
    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", "--allow-file-access-from-files",
         f"--virtual-time-budget={budget_ms}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


class _Facts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.plots: dict[str, str | None] = {}
        self.tables: list[str] = []
        self._in_table = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "body":
            self.body = found
        elif tag == "img" and "plot" in (found.get("class") or "").split():
            self.plots[found.get("src") or ""] = found.get("data-loaded")
        elif tag == "table":
            self._in_table += 1
            self.tables.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table -= 1

    def handle_data(self, data: str) -> None:
        if self._in_table:
            self.tables[-1] += data + " "


def page_facts(dom: str) -> _Facts:
    """The body's attributes, each plot's ``data-loaded`` by its ``src``, each table's text."""
    facts = _Facts()
    facts.feed(dom)
    return facts
