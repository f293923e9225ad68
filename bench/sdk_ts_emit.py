#!/usr/bin/env python3
"""What ``emit()`` costs in the TypeScript SDK, and what memory 1M events cost when the collector
is down, beside the Python SDK measured in the same run.

Both SDKs run against a dead endpoint (connection refused), so their senders only move events
into the spool and back off. The TypeScript figures come from ``bench/sdk_ts_emit.mjs`` (one Node
process per spool, ``--expose-gc`` so memory is read after a collection); it yields to the event
loop every 100 emits, as an editor's code does between callbacks. The Python figures come from
``bench/sdk_emit.py`` run as its own process. Rows: disk spool (the configuration for editors)
and memory spool (64 MiB bound: beyond it the oldest are dropped and counted). Figures go to
stdout and to ``bench/out/sdk_ts_emit.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

NODE_BENCH = REPO / "bench" / "sdk_ts_emit.mjs"


def typescript(events: int, spool: str) -> dict[str, Any]:
    out = subprocess.run(
        ["node", "--expose-gc", str(NODE_BENCH), str(events), spool],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    row: dict[str, Any] = json.loads(out.stdout)
    row["sdk"] = "TypeScript"
    return row


def python(events: int) -> list[dict[str, Any]]:
    subprocess.run(
        [sys.executable, str(REPO / "bench" / "sdk_emit.py"), "--events", str(events)],
        check=True,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    rows: list[dict[str, Any]] = json.loads((REPO / "bench" / "out" / "sdk_emit.json").read_text())[
        "rows"
    ]
    for row in rows:
        row["sdk"] = "Python"
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    rows = [
        typescript(args.events, "disk"),
        typescript(args.events, "memory"),
        *python(args.events),
    ]
    print(
        format_table(
            [
                "sdk",
                "spool",
                "events",
                "emit median us",
                "emit p99 us",
                "queued",
                "queue full",
                "spool dropped",
                "RSS growth MiB",
                "spool file MiB",
            ],
            [
                [
                    r["sdk"],
                    r["spool"],
                    r["events"],
                    r["emit_median_us"],
                    r["emit_p99_us"],
                    r["results"].get("queued", 0),
                    r["results"].get("queue_full", 0),
                    r["counters"]["dropped"] - r["results"].get("queue_full", 0),
                    r["rss_growth_mib"],
                    r["spool_file_mib"],
                ]
                for r in rows
            ],
        )
    )
    path = write_results(
        "sdk_ts_emit", {"benchmark": "sdk_ts_emit", "machine": machine(), "rows": rows}
    )
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
