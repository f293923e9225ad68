"""The ``ab_report`` and ``ab_srm`` marts: the A/B statistics, computed once per catalog build.

The statistics (delta-method intervals, p-values, the median's interval, the SRM chi-square) are
Python (:mod:`warehouse.ab`), not SQL. They are computed here from ``ab_arms`` and
``ab_latency_histogram`` when the catalog is built and written into DuckDB as tables, so a
dashboard reading the marts and ``rtrl report ab`` reading them show the very same numbers.

``ab_report`` compares every arm of an experiment with every other arm taken as the control
(a report names its control; the mart cannot know which one a reader means, and an experiment
has few arms). The family a Holm adjustment runs over is one report's: every arm and metric
against one control. ``ab_srm`` checks each experiment's split against its configured shares where
the data records them: a canary's experiment is named, with its share, by the checkpoint
announcement of its candidate (the ``checkpoints`` mart), so its arms ``canary`` and
``parent`` are tested against that share. Events and rollouts carry an experiment's name and
arm only, so any other experiment is tested against equal shares, and ``rtrl report ab
--weights`` tests the same counts against its configuration.

The tables' columns are declared in their SQL files (``sql/33_ab_report.sql``,
``sql/34_ab_srm.sql``); this module fills them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from stats.multiple import holm
from warehouse.ab import (
    Change,
    RatioSums,
    median_with_variance,
    relative_change,
    sequential_change,
)
from warehouse.ab import sample_ratio_mismatch as srm_check

# the arms of a canary's experiment, as the gateway names them (release/canary.py)
CANARY_ARM, PARENT_ARM = "canary", "parent"

SQL_DIR = Path(__file__).resolve().parent / "sql"

# metric -> (label, prefix of its sums in ab_arms; None for the median)
METRICS: dict[str, tuple[str, str | None]] = {
    "kept_share": ("accepted edits still in the codebase", "kept"),
    "kept_per_interaction": ("edits kept per interaction", "keptn"),
    "dissatisfied_rate": ("dissatisfied follow-ups", "dissat"),
    "latency_mean_ms": ("latency, mean (ms)", "latency"),
    "latency_p50_ms": ("latency, p50 (ms)", None),
    "mean_reward": ("mean reward", "reward"),
    "invalid_tool_calls_per_interaction": ("invalid tool calls per interaction", "invalid"),
    "tool_calls_per_interaction": ("tool calls per interaction", "calls"),
    "tool_call_share": ("interactions with a tool call", "withcalls"),
}

Histogram = tuple[list[float], list[int]]  # sorted distinct latencies, their counts


def fill_ab_report(con: duckdb.DuckDBPyConnection) -> None:
    """Insert one row per (experiment, control arm, arm, metric) into the empty ``ab_report``."""
    rows = _report_rows(_arms(con), lambda e, a: _histogram(con, e, a))
    if rows:
        con.executemany(f"INSERT INTO ab_report VALUES ({', '.join('?' * len(rows[0]))})", rows)


def fill_ab_report_by_org(con: duckdb.DuckDBPyConnection) -> None:
    """The same report for each organisation's own users (``ab_report_by_org``): every decision
    per organisation, a small one's never carried by the large ones'. Its arms are ``ab_arms``'
    own query with the organisation kept as a group (``GROUP BY ALL``), so the metrics are
    defined once."""
    by_org: dict[str, dict[str, dict[str, dict]]] = {}
    for org, row in _rows(con, _per_org(SQL_DIR / "31_ab_arms.sql", "org_id")):
        by_org.setdefault(org, {}).setdefault(row["experiment_name"], {})[
            row["experiment_arm"]] = row  # fmt: skip
    histograms: dict[tuple[str, str, str], Histogram] = {}
    query = _per_org(SQL_DIR / "32_ab_latency_histogram.sql", "r.org_id")
    for org, row in _rows(con, query + " ORDER BY latency_ms"):
        values, counts = histograms.setdefault(
            (org, row["experiment_name"], row["experiment_arm"]), ([], []))  # fmt: skip
        values.append(row["latency_ms"])
        counts.append(row["n"])
    rows = []
    for org, arms in sorted(by_org.items()):

        def histogram(experiment: str, arm: str, org: str = org) -> Histogram | None:
            return histograms.get((org, experiment, arm))

        rows += [(*row, org) for row in _report_rows(arms, histogram)]
    if rows:
        con.executemany(
            f"INSERT INTO ab_report_by_org VALUES ({', '.join('?' * len(rows[0]))})", rows
        )


def _per_org(sql_file: Path, org_column: str) -> str:
    """The SELECT of a model's SQL with the organisation as one more group: its ``CREATE ...
    AS`` cut, ``org_column`` selected first as ``_org`` (``GROUP BY ALL`` groups by it too)."""
    body = sql_file.read_text().split(" AS\nSELECT", 1)[1].strip().rstrip(";")
    return f"SELECT {org_column} AS _org, {body}"


def _rows(con: duckdb.DuckDBPyConnection, query: str) -> list[tuple[str, dict]]:
    cursor = con.execute(f"SELECT * FROM ({query}) WHERE _org IS NOT NULL")
    names = [d[0] for d in cursor.description]
    found = []
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        found.append((str(row.pop("_org")), row))
    return found


def _report_rows(arms_of: dict[str, dict[str, dict]],
                 histogram: Callable[[str, str], Histogram | None]) -> list[tuple]:  # fmt: skip
    """Every (experiment, control, arm, metric) row of ``arms_of`` (experiment -> arm -> its
    ``ab_arms`` row), Holm-adjusted within each (experiment, control)."""
    rows = []
    for experiment, arms in arms_of.items():
        medians = {arm: median_with_variance(*h) if (h := histogram(experiment, arm))
                   else (None, None) for arm in arms}  # fmt: skip
        for control in sorted(arms):
            family: list[tuple[tuple, Change, Change]] = []  # (keys and counts, fixed, seq)
            for arm in sorted(a for a in arms if a != control):
                t, c = arms[arm], arms[control]
                users = int(t["n_users"]) + int(c["n_users"])
                for order, metric in enumerate(METRICS):
                    ch, seq = _compare(metric, t, c, medians[arm], medians[control], users)
                    keys = (experiment, arm, control, metric, order, int(t["n_users"]),
                            int(t["n_interactions"]))  # fmt: skip
                    family.append((keys, ch, seq))
            p_holm = holm([ch.p_value for _, ch, _ in family])
            seq_holm = holm([seq.p_value for _, _, seq in family])
            for (keys, ch, seq), adjusted, seq_adjusted in zip(family, p_holm, seq_holm,
                                                               strict=True):  # fmt: skip
                rows.append((*keys, ch.control, ch.treatment, ch.relative, ch.ci_low,
                             ch.ci_high, ch.p_value, adjusted, seq.ci_low, seq.ci_high,
                             seq.p_value, seq_adjusted))  # fmt: skip
    return rows


def fill_ab_srm(con: duckdb.DuckDBPyConnection) -> None:
    """Insert one row per (experiment, arm) of every experiment with two arms or more."""
    rows = []
    canaries = dict(
        con.execute(
            "SELECT canary_experiment, canary_percent FROM checkpoints "
            "WHERE canary_experiment IS NOT NULL AND canary_percent IS NOT NULL"
        ).fetchall()
    )
    for experiment, arms in _arms(con).items():
        if len(arms) < 2:
            continue
        weights = None
        if experiment in canaries and set(arms) == {CANARY_ARM, PARENT_ARM}:
            weights = {CANARY_ARM: canaries[experiment], PARENT_ARM: 100 - canaries[experiment]}
        check = srm_check({arm: int(a["n_users"]) for arm, a in arms.items()}, weights)
        for arm in sorted(arms):
            rows.append((experiment, arm, check.observed[arm], check.expected_share[arm],
                         check.chi2, check.df, check.p_value, check.alpha, check.srm))  # fmt: skip
    if rows:
        con.executemany(f"INSERT INTO ab_srm VALUES ({', '.join('?' * len(rows[0]))})", rows)


# model name -> what fills its table after its SQL created it (empty)
FILLERS: dict[str, Callable[[duckdb.DuckDBPyConnection], None]] = {
    "ab_report": fill_ab_report,
    "ab_report_by_org": fill_ab_report_by_org,
    "ab_srm": fill_ab_srm,
}


def _arms(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, dict]]:
    """experiment -> arm -> its ``ab_arms`` row as a dict."""
    cursor = con.execute("SELECT * FROM ab_arms ORDER BY experiment_name, experiment_arm")
    names = [d[0] for d in cursor.description]
    out: dict[str, dict[str, dict]] = {}
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        out.setdefault(row["experiment_name"], {})[row["experiment_arm"]] = row
    return out


def _histogram(con: duckdb.DuckDBPyConnection, experiment: str, arm: str) -> Histogram | None:
    columns = con.execute(  # columnar fetch: the histogram can have 10^5 distinct latencies
        """SELECT latency_ms, n FROM ab_latency_histogram
           WHERE experiment_name = ? AND experiment_arm = ? ORDER BY latency_ms""",
        [experiment, arm],
    ).fetchnumpy()
    values = columns["latency_ms"].tolist()
    return (values, columns["n"].tolist()) if values else None


def _sums(arm: dict, prefix: str) -> RatioSums:
    return RatioSums(int(arm["n_users"]), *(float(arm[f"{prefix}_{s}"] or 0)
                                             for s in ("x", "y", "xx", "yy", "xy")))  # fmt: skip


def _compare(metric: str, treatment: dict, control: dict,
             median_t: tuple[float | None, float | None],
             median_c: tuple[float | None, float | None],
             users: int) -> tuple[Change, Change]:  # fmt: skip
    """The fixed-sample change and the anytime-valid one, over ``users`` of both arms."""
    prefix = METRICS[metric][1]
    if prefix is None:
        # The median's interval treats interactions as independent, while the anytime-valid
        # sequence rests on users as its units: it gets none (the change is shown, untested).
        args = (*median_t, *median_c)
        fixed = relative_change(*args)
        return fixed, Change(fixed.control, fixed.treatment, fixed.relative, None, None)
    st, sc = _sums(treatment, prefix), _sums(control, prefix)
    args = (st.estimate(), st.variance(), sc.estimate(), sc.variance())
    return relative_change(*args), sequential_change(*args, users)
