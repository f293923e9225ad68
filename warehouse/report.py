"""`rtrl report ab`: an experiment's arms, each treatment against the control, from the marts.

Metrics (definitions in ``sql/11_interaction_outcomes.sql`` and ``sql/31_ab_arms.sql``):

* kept_share: of the accepted edits whose fate was measured, the mean share still in the codebase
  (0 when reverted, else the last in-window ``edit.retention`` fraction);
* dissatisfied_rate: share of interactions whose follow-up was dissatisfied (privacy mode excluded);
* latency_mean_ms and latency_p50_ms: the last in-window ``interaction.completed`` latency;
* mean_reward: mean reward of scored interactions.

Statistics are in :mod:`warehouse.ab`. The report reads the catalog as it was last built
(``rtrl warehouse catalog``), building it first only when there is none or ``refresh`` asks.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict, dataclass

from warehouse.ab import Change, RatioSums, median_with_variance, relative_change
from warehouse.catalog import build_catalog, connect, default_db
from warehouse.store import Store

# metric column of ab_arms -> (label, prefix of its sums in ab_arms; None for the median)
METRICS: dict[str, tuple[str, str | None]] = {
    "kept_share": ("accepted edits still in the codebase", "kept"),
    "dissatisfied_rate": ("dissatisfied follow-ups", "dissat"),
    "latency_mean_ms": ("latency, mean (ms)", "latency"),
    "latency_p50_ms": ("latency, p50 (ms)", None),
    "mean_reward": ("mean reward", "reward"),
}


@dataclass(frozen=True)
class ReportRow:
    experiment: str
    arm: str
    control_arm: str
    metric: str
    n_users: int
    n_interactions: int
    control: float | None
    value: float | None
    relative_change: float | None
    ci_low: float | None
    ci_high: float | None


def ab_report(store: Store, experiment: str, control: str = "control", db: str | None = None,
              refresh: bool = False) -> list[ReportRow]:  # fmt: skip
    """One row per (treatment arm, metric). Raises LookupError when the experiment or its
    control arm has no data."""
    db = db or default_db(store)
    if refresh or not os.path.exists(db):
        build_catalog(store, db)
    con = connect(store, db, read_only=True)
    try:
        cursor = con.execute("SELECT * FROM ab_arms WHERE experiment_name = ?", [experiment])
        names = [d[0] for d in cursor.description]
        arms = {row[names.index("experiment_arm")]: dict(zip(names, row, strict=True))
                for row in cursor.fetchall()}  # fmt: skip
        histograms: dict[str, tuple[list[float], list[int]]] = {}
        for arm in arms:  # columnar fetch: the histogram can have 10^5 distinct latencies
            columns = con.execute(
                """SELECT latency_ms, n FROM ab_latency_histogram
                   WHERE experiment_name = ? AND experiment_arm = ? ORDER BY latency_ms""",
                [experiment, arm]).fetchnumpy()  # fmt: skip
            histograms[arm] = (columns["latency_ms"].tolist(), columns["n"].tolist())
    finally:
        con.close()
    if control not in arms:
        raise LookupError(f"experiment {experiment!r} has no arm {control!r} "
                          f"(arms: {sorted(arms) or 'none'})")  # fmt: skip
    rows = []
    for arm in sorted(a for a in arms if a != control):
        for metric in METRICS:
            change = _compare(metric, arms[arm], arms[control], histograms.get(arm),
                              histograms.get(control))  # fmt: skip
            rows.append(ReportRow(experiment, arm, control, metric, int(arms[arm]["n_users"]),
                                  int(arms[arm]["n_interactions"]), change.control,
                                  change.treatment, change.relative, change.ci_low,
                                  change.ci_high))  # fmt: skip
    return rows


def _sums(arm: dict, prefix: str) -> RatioSums:
    return RatioSums(int(arm["n_users"]), *(float(arm[f"{prefix}_{s}"] or 0)
                                             for s in ("x", "y", "xx", "yy", "xy")))  # fmt: skip


def _compare(metric: str, treatment: dict, control: dict, hist_t, hist_c) -> Change:  # noqa: ANN001
    prefix = METRICS[metric][1]
    if prefix is None:
        t, var_t = median_with_variance(*hist_t) if hist_t else (None, None)
        c, var_c = median_with_variance(*hist_c) if hist_c else (None, None)
        return relative_change(t, var_t, c, var_c)
    st, sc = _sums(treatment, prefix), _sums(control, prefix)
    return relative_change(st.estimate(), st.variance(), sc.estimate(), sc.variance())


def render(rows: list[ReportRow], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([asdict(r) for r in rows], indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(ReportRow.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
        return out.getvalue()
    if fmt == "table":
        return _table(rows)
    raise ValueError(f"unknown format {fmt!r}")


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.2f} %"


def _table(rows: list[ReportRow]) -> str:
    if not rows:
        return "no treatment arm to compare\n"
    lines = []
    for arm in dict.fromkeys(r.arm for r in rows):
        first = next(r for r in rows if r.arm == arm)
        lines.append(
            f"experiment {first.experiment}: {arm} vs {first.control_arm} "
            f"({first.n_users} users, {first.n_interactions} interactions in {arm})"
        )
        header = f"{'metric':38} {first.control_arm:>12} {arm:>12} {'change':>10}  95 % CI"
        lines += [header, "-" * (len(header) + 22)]
        for r in (r for r in rows if r.arm == arm):
            ci = "-" if r.ci_low is None else f"[{_pct(r.ci_low)}, {_pct(r.ci_high)}]"
            lines.append(
                f"{METRICS[r.metric][0]:38} {_num(r.control):>12} {_num(r.value):>12} "
                f"{_pct(r.relative_change):>10}  {ci}"
            )
        lines.append("")
    return "\n".join(lines)
