"""`rtrl report ab`: an experiment's arms, each treatment against the control, from the marts.

Metrics (definitions in ``sql/11_interaction_outcomes.sql`` and ``sql/31_ab_arms.sql``):

* kept_share: of the accepted edits whose fate was measured, the mean share still in the codebase
  (0 when reverted, else the last in-window ``edit.retention`` fraction);
* kept_per_interaction: the same kept fractions summed over all of an arm's interactions, with
  or without an edit: how much of the agent's code stays per request. kept_share is read among
  accepted edits only, so a treatment that gets more (and harder) edits accepted can raise what
  users keep while its share among the accepted stays flat; this one shows it;
* dissatisfied_rate: share of interactions whose follow-up was dissatisfied (privacy mode excluded);
* latency_mean_ms and latency_p50_ms: the last in-window ``interaction.completed`` latency;
* mean_reward: mean reward of scored interactions;
* invalid_tool_calls_per_interaction: the agent's invalid tool calls (``agent.tool_call`` with
  ``valid: false``, the reward record's ``n_invalid_tool_calls``) over all of an arm's
  interactions, scored or not: the agents' reward hack, broken calls, read per user like the rest;
* tool_calls_per_interaction and tool_call_share: every tool call (``n_tool_calls``) over all of
  an arm's interactions, and the share of interactions with at least one: the other hack, an
  agent that stops acting. A fall in calls alone can be success (fewer repairs); a fall in the
  share of interactions that act at all is avoidance.

Each p-value is shown beside its Holm adjustment across every arm and metric of the report
(the family whose any-false-alarm rate is kept at the level). ``sequential`` shows the
anytime-valid intervals and p-values instead of the fixed-sample ones: a mart refreshed and
read repeatedly is looked at many times, and a fixed-sample 95 % interval is right only once.

The report reads the ``ab_report`` and ``ab_srm`` marts (computed at catalog build by
:mod:`warehouse.ab_mart`, statistics in :mod:`warehouse.ab`), so it prints what dashboards show.
Only the SRM check against configured ``weights`` is computed here, from the mart's counts: the
data records no weights. It reads the catalog as it was last built (``rtrl warehouse catalog``),
building it first only when there is none or ``refresh`` asks.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from warehouse.ab import SampleRatio, sample_ratio_mismatch
from warehouse.ab_mart import METRICS
from warehouse.catalog import build_catalog, connect, default_db
from warehouse.store import Store

__all__ = ["METRICS", "ReportRow", "ab_report", "ab_srm", "parse_weights", "render"]


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
    p_value: float | None
    p_holm: float | None  # p_value adjusted by Holm across the report's arms and metrics
    seq_ci_low: float | None  # anytime-valid 95 % interval (stats.sequential)
    seq_ci_high: float | None
    seq_p_value: float | None
    seq_p_holm: float | None


_COLUMNS = ", ".join(ReportRow.__dataclass_fields__)


def _open(store: Store, db: str | None, refresh: bool):  # noqa: ANN202 - a DuckDB connection
    db = db or default_db(store)
    if refresh or not os.path.exists(db):
        build_catalog(store, db)
    return connect(store, db, read_only=True)


def ab_report(store: Store, experiment: str, control: str = "control", db: str | None = None,
              refresh: bool = False, org: str | None = None) -> list[ReportRow]:  # fmt: skip
    """One row per (treatment arm, metric), from the ``ab_report`` mart (with ``org``: that
    organisation's own users, from ``ab_report_by_org``). Raises LookupError when the
    experiment or its control arm has no data."""
    con = _open(store, db, refresh)
    table, where, params = "ab_report", "", [experiment, control]
    if org is not None:
        table, where, params = "ab_report_by_org", " AND org_id = ?", [*params, org]
    listing = ("SELECT experiment_arm FROM ab_arms WHERE experiment_name = ? ORDER BY 1"
               if org is None else "SELECT DISTINCT control_arm FROM ab_report_by_org "
               "WHERE experiment = ? AND org_id = ? ORDER BY 1")  # fmt: skip
    try:
        arms = [r[0] for r in con.execute(listing, [experiment, *params[2:]]).fetchall()]
        if control not in arms:
            whose = f" among {org}'s users" if org is not None else ""
            raise LookupError(f"experiment {experiment!r} has no arm {control!r}{whose} "
                              f"(arms: {arms or 'none'})")  # fmt: skip
        found = con.execute(
            f"""SELECT {_COLUMNS} FROM {table} WHERE experiment = ? AND control_arm = ?{where}
                ORDER BY arm, metric_order""",
            params).fetchall()  # fmt: skip
    finally:
        con.close()
    return [ReportRow(*row) for row in found]


def ab_srm(store: Store, experiment: str, weights: Mapping[str, float] | None = None,
           db: str | None = None, refresh: bool = False) -> SampleRatio | None:  # fmt: skip
    """The experiment's SRM check: the ``ab_srm`` mart's figures (equal shares), or its counts
    against ``weights`` when given. None when the experiment has fewer than two arms."""
    con = _open(store, db, refresh)
    try:
        rows = con.execute(
            """SELECT arm, observed, expected_share, chi2, df, p_value, alpha, srm FROM ab_srm
               WHERE experiment = ? ORDER BY arm""", [experiment]).fetchall()  # fmt: skip
    finally:
        con.close()
    if not rows:
        return None
    observed = {r[0]: int(r[1]) for r in rows}
    if weights is not None:
        return sample_ratio_mismatch(observed, weights, alpha=rows[0][6])
    _, _, _, chi2, df, p, alpha, srm = rows[0]
    return SampleRatio(observed, {r[0]: r[2] for r in rows}, chi2, df, p, alpha, srm)


def parse_weights(text: str) -> dict[str, float]:
    """``--weights`` as ``ARM=WEIGHT,...`` (any positive numbers; they are normalised).

    >>> parse_weights("parent=90, canary=10")
    {'parent': 90.0, 'canary': 10.0}
    """
    out: dict[str, float] = {}
    for part in text.split(","):
        arm, sep, weight = part.strip().rpartition("=")
        try:
            value = float(weight)
        except ValueError:
            value = float("nan")
        if not sep or not arm or not value > 0 or arm in out:
            raise ValueError(f"--weights: {part.strip()!r} is not ARM=POSITIVE_WEIGHT "
                             "(each arm once)")  # fmt: skip
        out[arm] = value
    return out


def render(rows: list[ReportRow], fmt: str, srm: SampleRatio | None = None,
           sequential: bool = False) -> str:  # fmt: skip
    """The report as ``table`` (SRM check first; ``sequential``: the anytime-valid figures),
    ``json`` (``{"rows": [...], "srm": ...}``) or ``csv`` (the rows only: the SRM check is not
    a row of them); json and csv carry both kinds of figures."""
    if fmt == "json":
        body = {"rows": [asdict(r) for r in rows], "srm": None if srm is None else asdict(srm)}
        return json.dumps(body, indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(ReportRow.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
        return out.getvalue()
    if fmt == "table":
        return _srm_lines(srm) + _table(rows, sequential)
    raise ValueError(f"unknown format {fmt!r}")


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.2f} %"


def _p(v: float | None) -> str:
    return "-" if v is None else ("<0.0001" if v < 1e-4 else f"{v:.4f}")


def _srm_lines(srm: SampleRatio | None) -> str:
    if srm is None:
        return ""
    split = ", ".join(f"{arm} {n} ({srm.expected_share[arm]:.1%} expected)"
                      for arm, n in srm.observed.items())  # fmt: skip
    verdict = ("SAMPLE RATIO MISMATCH: the split is not the configured one; distrust every "
               "metric below" if srm.srm else "no mismatch")  # fmt: skip
    return (f"sample ratio (users): {split}; chi2 {srm.chi2:.2f}, df {srm.df}, "
            f"p {_p(srm.p_value)} (alarm below {srm.alpha:g}): {verdict}\n\n")  # fmt: skip


def _table(rows: list[ReportRow], sequential: bool = False) -> str:
    if not rows:
        return "no treatment arm to compare\n"
    kind = "anytime 95 % CS" if sequential else "95 % CI"
    lines = [
        f"p (Holm): adjusted across the {len(rows)} comparisons below (arms x metrics); "
        "compare with 0.05 for a 5 % chance of any false alarm"
        + ("; anytime-valid: they hold at every refresh (N* 5,000 users); latency p50 has "
           "none (its interval counts interactions, not users)" if sequential
           else "; fixed-sample: right for one look, use --sequential for repeated looks"),
        "",
    ]  # fmt: skip
    for arm in dict.fromkeys(r.arm for r in rows):
        first = next(r for r in rows if r.arm == arm)
        lines.append(
            f"experiment {first.experiment}: {arm} vs {first.control_arm} "
            f"({first.n_users} users, {first.n_interactions} interactions in {arm})"
        )
        header = (f"{'metric':38} {first.control_arm:>12} {arm:>12} {'change':>10}  "
                  f"{kind:32} {'p':>7} {'p (Holm)':>8}")  # fmt: skip
        lines += [header, "-" * len(header)]
        for r in (r for r in rows if r.arm == arm):
            low, high, p, adjusted = (
                (r.seq_ci_low, r.seq_ci_high, r.seq_p_value, r.seq_p_holm)
                if sequential
                else (r.ci_low, r.ci_high, r.p_value, r.p_holm)
            )
            ci = "-" if low is None else f"[{_pct(low)}, {_pct(high)}]"
            lines.append(
                f"{METRICS[r.metric][0]:38} {_num(r.control):>12} {_num(r.value):>12} "
                f"{_pct(r.relative_change):>10}  {ci:32} {_p(p):>7} {_p(adjusted):>8}"
            )
        lines.append("")
    return "\n".join(lines)
