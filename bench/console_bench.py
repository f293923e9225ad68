#!/usr/bin/env python3
"""The live page's update delay: from a change on disk (a candidate registered, as a training
round registers one) until the page open in headless Chromium shows it, without a reload.

    python bench/console_bench.py [--changes 20] [--refresh-s 0.5 2]

For each ``--refresh-s`` (the console's read interval), ``rtrl console`` runs on a registry of
the tiny model, the page stays open in Chromium (over the DevTools protocol), and each change is
timed until its row is in the page's DOM. The limit printed beside each figure is the refresh
interval plus one second (a change waits for the next read, at most one interval, then the
read, the event and the drawing); the delay's median should sit near half the interval.
Figures to stdout and ``bench/out/console_bench.json``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)
sys.path.insert(0, str(REPO))

from checkpoints.store import CheckpointRegistry  # noqa: E402
from checkpoints.weights import register_base  # noqa: E402
from models.tiny_model import ensure_tiny_model  # noqa: E402
from tests.console.cdp import Browser  # noqa: E402
from tests.console.platform import ConsoleProcess  # noqa: E402
from tests.support.checkpoints import register_variant  # noqa: E402


def delays(root: Path, refresh_s: float, changes: int) -> list[float]:
    """Seconds from each registration until the page shows its candidate."""
    registry = CheckpointRegistry(root / "registry")
    register_base(registry, "t-0000", ensure_tiny_model(root / "models"))
    console = ConsoleProcess(["--registry", str(registry.root), "--refresh-s", str(refresh_s)],
                             root / "console.log")  # fmt: skip
    browser = Browser(console.url, root / "chromium")
    out = []
    try:
        browser.wait_for("Number(document.body.dataset.version) > 0", 30)
        rng = random.Random(0)
        for n in range(1, changes + 1):
            # a change right after the page updated would always wait a whole interval for the
            # next read: changes come at a random phase of the console's reads, as in life
            time.sleep(rng.uniform(0, refresh_s))
            checkpoint = f"t-{n:04d}"
            started = time.monotonic()
            register_variant(registry, checkpoint, "t-0000", seed=n, status="rejected",
                             reasons=("bench",))  # fmt: skip
            row = (
                f"document.querySelector('#candidates tbody tr[data-checkpoint=\"{checkpoint}\"]')"
            )
            browser.wait_for(row, timeout_s=30, every_s=0.005)
            out.append(time.monotonic() - started)
    finally:
        browser.close()
        console.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=20, help="changes timed at each interval")
    ap.add_argument("--refresh-s", type=float, nargs="+", default=[0.5, 2.0],
                    help="the console's read intervals to measure")  # fmt: skip
    args = ap.parse_args()
    header = ["refresh (s)", "changes", "median (s)", "p95 (s)", "max (s)", "limit (s)"]
    rows = []
    for refresh_s in args.refresh_s:
        with tempfile.TemporaryDirectory() as tmp:
            got = sorted(delays(Path(tmp), refresh_s, args.changes))
        p95 = got[min(len(got) - 1, round(0.95 * (len(got) - 1)))]
        rows.append([refresh_s, len(got), round(statistics.median(got), 3), round(p95, 3),
                     round(got[-1], 3), refresh_s + 1.0])  # fmt: skip
        print(format_table(header, rows[-1:]))
    print()
    print(format_table(header, rows))
    runs = [dict(zip(["refresh_s", "changes", "median_s", "p95_s", "max_s", "limit_s"], r,
                     strict=True)) for r in rows]  # fmt: skip
    print(f"figures: {write_results('console_bench', {'machine': machine(), 'runs': runs})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
