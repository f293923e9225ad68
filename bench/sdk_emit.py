#!/usr/bin/env python3
"""What ``emit()`` costs the editor's thread, and what memory 1M events cost when the collector
is down.

The SDK runs against a dead endpoint (connection refused), so the sender only moves events from
the hand-off queue into the spool and backs off. Each ``emit`` call is timed on its own
(validation, UUIDv7, serialisation, enqueue); then the process's RSS is read once the sender has
spooled everything. Rows: the SQLite spool (the shipped configuration for editors) and the
in-memory spool (bounded at its default 64 MiB: beyond it the oldest are dropped and counted).
Figures go to stdout and to ``bench/out/sdk_emit.json``.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import format_table, machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import psutil  # noqa: E402

from ingest.sdk import Client, EmitResult, SdkConfig  # noqa: E402

DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, connect is refused
MIB = 1 << 20
SHAPES: list[tuple[str, dict[str, Any]]] = [  # (type, payload): a realistic mix a plugin emits
    ("interaction.started", {"mode": "agent"}),
    ("agent.tool_call", {"tool": "read_file", "valid": True}),
    ("agent.edit_proposed", {"edit_id": "e-1", "lines_added": 12, "lines_removed": 3}),
    ("edit.accepted", {"edit_id": "e-1"}),
    ("interaction.completed", {"latency_ms": 2300, "output_tokens": 512}),
]


def percentile(sorted_ns: array, q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000.0


def run(n: int, spool_path: Path | None) -> dict:
    gc.collect()
    rss_before = psutil.Process().memory_info().rss
    config = SdkConfig(
        endpoint=DEAD_ENDPOINT,
        api_key="rtrl_bench",
        org_id="org-01",
        spool_path=spool_path,
        spool_max_events=2 * n,
        spool_max_bytes=(4096 * MIB if spool_path else 64 * MIB),
    )
    client = Client(config)
    durations = array("q", bytes(8 * n))
    results = {r: 0 for r in EmitResult}
    clock = time.perf_counter_ns
    started = time.perf_counter()
    for i in range(n):
        event_type, payload = SHAPES[i % len(SHAPES)]
        t0 = clock()
        outcome = client.emit(
            event_type,
            f"i-{i // len(SHAPES)}",
            payload,
            session_id="s-1",
            user_id="u-91b7584a",
            checkpoint_id="ckpt-0002",
        )
        durations[i] = clock() - t0
        results[outcome] += 1
    emit_s = time.perf_counter() - started
    # Let the sender move what is queued into the spool (it cannot deliver anything).
    deadline = time.monotonic() + 120
    while (
        client.counters().spooled + client.counters().dropped < results[EmitResult.queued]
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    rss_after = psutil.Process().memory_info().rss
    counters = client.counters()
    left = client.close(0.5)
    ordered = array("q", sorted(durations))
    return {
        "spool": "sqlite" if spool_path else "memory (64 MiB)",
        "events": n,
        "emit_median_us": percentile(ordered, 0.50),
        "emit_p99_us": percentile(ordered, 0.99),
        "emit_p999_us": percentile(ordered, 0.999),
        "emit_calls_per_s": n / emit_s,
        "results": {str(k): v for k, v in results.items()},
        "counters": counters.as_dict(),
        "undelivered_at_close": left,
        "rss_before_mib": rss_before / MIB,
        "rss_after_mib": rss_after / MIB,
        "rss_growth_mib": (rss_after - rss_before) / MIB,
        "spool_file_mib": (
            sum(p.stat().st_size for p in spool_path.parent.glob("*")) / MIB if spool_path else 0.0
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--spool", choices=["sqlite", "memory", "both"], default="both")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rtrl-sdk-bench-") as tmp:
        if args.spool in ("sqlite", "both"):
            rows.append(run(args.events, Path(tmp) / "spool.sqlite"))
        if args.spool in ("memory", "both"):
            rows.append(run(args.events, None))
    print(
        format_table(
            [
                "spool",
                "events",
                "emit median us",
                "emit p99 us",
                "emit/s",
                "queued",
                "queue full",
                "spool dropped",
                "RSS growth MiB",
                "spool file MiB",
            ],
            [
                [
                    r["spool"],
                    r["events"],
                    r["emit_median_us"],
                    r["emit_p99_us"],
                    int(r["emit_calls_per_s"]),
                    r["results"]["queued"],
                    r["results"]["queue_full"],
                    r["counters"]["dropped"] - r["results"]["queue_full"],
                    r["rss_growth_mib"],
                    r["spool_file_mib"],
                ]
                for r in rows
            ],
        )
    )
    print(
        f"peak RSS of the run: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    path = write_results("sdk_emit", {"benchmark": "sdk_emit", "machine": machine(), "rows": rows})
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
