"""Benchmark: the A/B report and the per-checkpoint daily summary on 10M reward rows.

Synthetic reward records are written by DuckDB straight into the warehouse layout (one Parquet
file per checkpoint and day), 5 % of interactions with a second revision. The catalog is built
as `rtrl warehouse catalog` builds it (marts materialised as tables). The per-interaction
outcomes (latency, kept edits) come from the raw event archive, which 100M synthetic events
would take too long to write: they are synthesised into their table, and the A/B tables rebuilt.
Then each query is timed, best of ``--repeat``.

    python3 bench/warehouse_marts.py --rows 10000000

Figures go to ``bench/out/warehouse_marts.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, reexec_in_venv, write_results  # noqa: E402

reexec_in_venv(__file__)

import duckdb  # noqa: E402

from warehouse.catalog import build_catalog, connect, load_models, run_model  # noqa: E402
from warehouse.layout import hive_folder, part_name  # noqa: E402
from warehouse.report import ab_report  # noqa: E402
from warehouse.store import Store  # noqa: E402

CHECKPOINTS = ("ckpt-0001", "ckpt-0002", "ckpt-0003", "ckpt-0004")
DAYS = ("2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30")


def write_rewards(store: Store, rows: int) -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    per_file = rows // (len(CHECKPOINTS) * len(DAYS))
    part = 0
    for c, checkpoint in enumerate(CHECKPOINTS):
        for day in DAYS:
            first = part * per_file
            folder = store.path(hive_folder("rewards", [("date", day), ("checkpoint", checkpoint)]))
            os.makedirs(folder, exist_ok=True)
            path = f"{folder}/{part_name(c, first, first + per_file - 1)}"
            con.execute(f"""
            COPY (
              WITH base AS (
                SELECT i, (hash(i) >> 1)::BIGINT AS h, (hash(i) % 1000)::INT AS u
                FROM range({first}, {first + per_file}) t(i)
              )
              SELECT 'i_' || i::VARCHAR AS interaction_id,
                     CASE WHEN h % 20 = 0 THEN 1 ELSE 0 END::BIGINT AS revision,
                     'v1-d73c1d00' AS reward_version,
                     CASE WHEN h % 12 = 0 THEN 'censored' ELSE 'scored' END AS status,
                     CASE WHEN h % 12 = 0 THEN 'no_outcome' END AS censor_reason,
                     CASE WHEN h % 12 = 0 THEN NULL
                          ELSE round(((h % 4000) / 1000.0) - 2.0 + {c} * 0.01, 6) END AS reward,
                     CASE WHEN h % 12 = 0 THEN NULL ELSE ((h >> 3) % 250) / 100.0 - 0.5 END
                         AS r_edit,
                     CASE WHEN h % 12 = 0 THEN NULL WHEN h % 9 = 0 THEN -1.0 ELSE 0.0 END
                         AS r_followup,
                     CASE WHEN h % 12 = 0 THEN NULL ELSE -0.5 * ((h >> 5) % 2) END AS r_tool,
                     CASE WHEN h % 12 = 0 THEN NULL ELSE 0.0 END AS r_clarify,
                     CASE WHEN h % 12 = 0 THEN NULL ELSE -((h >> 7) % 100) / 1000.0 END
                         AS r_latency,
                     'org-' || (u % 8)::VARCHAR AS org_id,
                     'u_' || (hash(i) % 200000)::VARCHAR AS user_id,
                     's_' || (i // 7)::VARCHAR AS session_id,
                     '{checkpoint}' AS checkpoint_id,
                     CASE WHEN u < 500 THEN 'exp-bench' END AS experiment_name,
                     CASE WHEN u < 500 THEN
                         CASE WHEN (hash(i) % 200000) % 2 = 0 THEN 'control' ELSE 'treatment' END
                     END AS experiment_arm,
                     TIMESTAMPTZ '{day} 00:00:00+00' + to_microseconds((h % 86400000000)::BIGINT)
                         AS t_open,
                     TIMESTAMPTZ '{day} 00:30:00+00' + to_microseconds((h % 86400000000)::BIGINT)
                         AS t_close,
                     (h % 15 + 1)::BIGINT AS n_events, 0::BIGINT AS n_duplicates,
                     0::BIGINT AS n_late, 0::BIGINT AS n_orphans, (h % 3)::BIGINT AS n_edits,
                     (h % 2)::BIGINT AS n_accepted, 0::BIGINT AS n_rejected,
                     0::BIGINT AS n_reverted, ((h >> 5) % 4)::BIGINT AS n_tool_calls,
                     ((h >> 5) % 2)::BIGINT AS n_invalid_tool_calls,
                     0::BIGINT AS n_clarifying, ((h >> 9) % 3)::BIGINT AS n_subagents,
                     ((h >> 9) % 2)::BIGINT AS n_subagents_unused,
                     h % 9 = 0 AS dissatisfied,
                     ['e' || i::VARCHAR, 'f' || i::VARCHAR] AS event_ids,
                     {c}::INTEGER AS _partition, i::BIGINT AS _offset
              FROM base
              UNION ALL  -- revision 0 of the interactions that were corrected
              SELECT 'i_' || i::VARCHAR, 0, 'v1-d73c1d00', 'censored', 'no_outcome', NULL, NULL,
                     NULL, NULL, NULL, NULL, 'org-0', 'u_' || (hash(i) % 200000)::VARCHAR, NULL,
                     '{checkpoint}', NULL, NULL,
                     TIMESTAMPTZ '{day} 00:00:00+00' + to_microseconds((h % 86400000000)::BIGINT),
                     TIMESTAMPTZ '{day} 00:30:00+00' + to_microseconds((h % 86400000000)::BIGINT),
                     1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, ['e' || i::VARCHAR], {c}, -i
              FROM base WHERE h % 20 = 0
            ) TO '{path}' (FORMAT parquet, COMPRESSION zstd)""")
            part += 1
    con.close()


def synthesise_outcomes(db: str) -> float:
    """Fill interaction_outcomes, then rebuild the A/B tables on it (the aggregates, then the
    ab_report and ab_srm marts); returns their build time."""
    con = duckdb.connect(db)
    con.execute("""
        CREATE OR REPLACE TABLE interaction_outcomes AS
        SELECT org_id, interaction_id,
               CASE WHEN hash(interaction_id) % 25 = 0 THEN NULL
                    ELSE 500 + hash(interaction_id) % 60000 END AS latency_ms,
               n_accepted AS n_accepted_edits, n_accepted AS n_kept_measured,
               n_accepted * ((hash(interaction_id) >> 4) % 1000) / 1000.0 AS kept_sum
        FROM rewards WHERE COALESCE(censor_reason, '') <> 'privacy_mode'""")
    start = time.perf_counter()
    for model in load_models():
        if model.name in ("ab_units", "ab_latency_histogram", "ab_report", "ab_srm"):
            run_model(con, model)  # the last two: the statistics, computed in Python
    took = time.perf_counter() - start
    con.execute("CHECKPOINT")
    con.close()
    return took


def best_of(repeat: int, fn) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--root", default=None, help="keep the warehouse here (default: temp)")
    parser.add_argument("--reuse", action="store_true", help="--root already holds the rows")
    args = parser.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="rtrl-bench-")
    store = Store(root)

    if not args.reuse:
        start = time.perf_counter()
        write_rewards(store, args.rows)
        print(
            f"wrote {args.rows:,} reward rows (+5 % older revisions) in "
            f"{time.perf_counter() - start:.1f} s under {root}"
        )
    start = time.perf_counter()
    db = build_catalog(store)
    took = time.perf_counter() - start
    print(f"catalog build (dedup to the rewards mart, outcomes, marts): {took:.1f} s")
    ab_build = synthesise_outcomes(db)
    print(f"A/B tables (ab_units, ab_latency_histogram, ab_report, ab_srm) build: {ab_build:.2f} s")

    con = connect(store, db, read_only=True)
    row = con.execute("SELECT count(*) FROM rewards").fetchone()
    assert row is not None  # an aggregate returns one row
    n = row[0]
    daily = best_of(
        args.repeat, lambda: con.execute("SELECT * FROM rewards_daily_by_checkpoint").fetchall()
    )
    daily_sql = next(m.sql for m in load_models() if m.name == "rewards_daily_by_checkpoint")
    select = daily_sql[daily_sql.index("SELECT", daily_sql.index("CREATE OR REPLACE")) :]
    select = select.rstrip().rstrip(";")
    recompute = best_of(args.repeat, lambda: con.execute(select).fetchall())
    con.close()
    report = best_of(args.repeat, lambda: ab_report(store, "exp-bench", db=db))
    print(f"rewards mart rows: {n:,}")
    print(
        f"per-checkpoint daily summary: {daily:.3f} s (goal <= 0.5 s); "
        f"recomputed from the rewards mart: {recompute:.3f} s"
    )
    print(f"A/B report (5 metrics, CIs):  {report:.3f} s (goal <= 0.5 s)")
    path = write_results("warehouse_marts", {
        "benchmark": "warehouse_marts", "machine": machine(), "reward_rows": n,
        "catalog_build_s": took, "ab_tables_build_s": ab_build,
        "daily_summary_s": daily, "daily_summary_recomputed_s": recompute, "ab_report_s": report,
    })  # fmt: skip
    print(f"figures in {path}")


if __name__ == "__main__":
    main()
