"""The A/B report against a fixture computed by hand (tests/fixtures/ab/README.md)."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

from tests.support.warehouse import land
from tests.warehouse.support import assert_matches_expected, fixture_events, fixture_records
from warehouse.ab import RatioSums, median_with_variance, relative_change
from warehouse.catalog import build_catalog
from warehouse.report import METRICS, ab_report, render
from warehouse.report_plot import plot_ab
from warehouse.store import Store


def test_report_matches_hand_computed_fixture(tmp_path):
    store = Store(str(tmp_path))
    land(store, "events", fixture_events())
    land(store, "rewards", fixture_records(), partition=2)
    build_catalog(store)
    rows = ab_report(store, "exp-fixture")
    assert_matches_expected(rows)

    table = render(rows, "table")
    assert "accepted edits still in the codebase" in table and "+25.00 %" in table
    assert render(rows, "csv").splitlines()[0].startswith("experiment,arm,control_arm,metric")
    assert json.loads(render(rows, "json"))["rows"][0]["experiment"] == "exp-fixture"

    svg = ElementTree.parse(plot_ab(rows, tmp_path / "ab.svg")).getroot()
    texts = " ".join(svg.itertext())
    assert "exp-fixture" in texts and "+25.00 %" in texts
    assert all(METRICS[r.metric][0] in texts for r in rows)


def test_unknown_control_arm_is_an_error(tmp_path):
    store = Store(str(tmp_path))
    land(store, "rewards", fixture_records())
    with pytest.raises(LookupError, match="no arm 'baseline'"):
        ab_report(store, "exp-fixture", control="baseline", refresh=True)


def test_delta_method_equals_binomial_variance_for_one_interaction_per_user():
    # 30 users, one interaction each, 12 successes: Var = p(1-p)/(n-1) with the n-1 estimator.
    sums = RatioSums(n=30, sx=30, sy=12, sxx=30, syy=12, sxy=12)
    assert sums.estimate() == pytest.approx(0.4)
    assert sums.variance() == pytest.approx(0.4 * 0.6 / 29)


def test_relative_change_is_undefined_against_a_zero_control():
    change = relative_change(0.3, 0.01, 0.0, 0.01)
    assert change.relative is None and change.ci_low is None


def test_median_interval_narrows_with_more_data():
    values = list(range(1, 101))
    _, var_small = median_with_variance(values, [1] * 100)
    _, var_large = median_with_variance(values, [100] * 100)
    assert var_large < var_small


def test_cli_prints_what_dashboards_read_from_the_marts(tmp_path, capsys):
    """`rtrl report ab` and a dashboard reading ab_report / ab_srm see the same numbers."""

    import sqlalchemy as sa

    from warehouse.__main__ import main
    from warehouse.catalog import sqlalchemy_url

    store = Store(str(tmp_path))
    land(store, "events", fixture_events())
    land(store, "rewards", fixture_records(), partition=2)
    db = build_catalog(store)
    assert main(["report", "ab", "--warehouse", str(tmp_path), "--experiment", "exp-fixture",
                 "--format", "json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    engine = sa.create_engine(sqlalchemy_url(db))
    try:
        with engine.connect() as conn:
            mart = conn.execute(sa.text(
                "SELECT * EXCLUDE (metric_order) FROM ab_report WHERE experiment = 'exp-fixture' "
                "AND control_arm = 'control' ORDER BY metric_order")).mappings().all()  # fmt: skip
            srm = conn.execute(sa.text(
                "SELECT * FROM ab_srm WHERE experiment = 'exp-fixture' ORDER BY arm"
            )).mappings().all()  # fmt: skip
    finally:
        engine.dispose()
    assert printed["rows"] == [dict(r) for r in mart]  # equal, not approximately equal
    assert printed["srm"]["observed"] == {r["arm"]: r["observed"] for r in srm}
    assert printed["srm"]["expected_share"] == {r["arm"]: r["expected_share"] for r in srm}
    assert [printed["srm"][k] for k in ("chi2", "p_value", "srm")] == [
        srm[0]["chi2"], srm[0]["p_value"], srm[0]["srm"]]  # fmt: skip
    for row in printed["rows"]:  # the p-value and the interval tell one story
        if row["ci_low"] is not None and row["ci_high"] > row["ci_low"]:
            assert (row["p_value"] < 0.05) is (not row["ci_low"] <= 0 <= row["ci_high"])
    # the mart holds the other direction too, for a reader whose control is the other arm
    assert ab_report(store, "exp-fixture", control="treatment")[0].arm == "control"


def _split(users: dict[str, int]) -> list[dict]:
    """Reward records of one interaction per user, ``users[arm]`` users in each arm."""
    template = next(r for r in fixture_records() if r["interaction_id"] == "N1")
    return [dict(template, interaction_id=f"{arm}-{k}", user_id=f"{arm}-u{k}",
                 experiment_name="exp-split", experiment_arm=arm)
            for arm, n in users.items() for k in range(n)]  # fmt: skip


FAIR, SKEWED = {"control": 1_000, "treatment": 1_000}, {"control": 1_100, "treatment": 900}


@pytest.mark.parametrize(("users", "fires"), [(FAIR, False), (SKEWED, True)])
def test_srm_mart_fires_on_a_skewed_split_only(tmp_path, capsys, users, fires):
    from warehouse.__main__ import main
    from warehouse.report import ab_srm

    store = Store(str(tmp_path))
    land(store, "rewards", _split(users))
    build_catalog(store)
    check = ab_srm(store, "exp-split")
    assert check is not None and check.srm is fires
    assert check.observed == users and check.expected_share == {"control": 0.5, "treatment": 0.5}
    assert main(["report", "ab", "--warehouse", str(tmp_path), "--experiment", "exp-split"]) == 0
    table = capsys.readouterr().out
    assert ("SAMPLE RATIO MISMATCH" in table) is fires
    # against a configured 55/45 split, 1,100/900 is exactly what was asked for
    weighted = ab_srm(store, "exp-split", {"control": 55, "treatment": 45})
    assert weighted is not None and weighted.srm is (not fires)
    assert main(["report", "ab", "--warehouse", str(tmp_path), "--experiment", "exp-split",
                 "--weights", "control=55,nope=45"]) == 1  # fmt: skip
    assert "weights name arms" in capsys.readouterr().err


def test_a_canary_split_is_checked_against_its_announced_share(tmp_path):
    """A 20 % canary's experiment is named with its share by its candidate's announcement, so
    800/200 users is no mismatch there, and 700/300 is."""
    from warehouse.report import ab_srm

    for users, fires in (({"parent": 800, "canary": 200}, False),
                         ({"parent": 700, "canary": 300}, True)):  # fmt: skip
        store = Store(str(tmp_path / str(fires)))
        records = [dict(r, experiment_name="canary-c-0002") for r in _split(users)]
        land(store, "rewards", records)
        announcement = {"checkpoint_id": "c-0002", "parent": "c-0001", "status": "canary",
                        "created_at": "2026-12-01T10:00:00Z", "reasons": [],
                        "evals": {"canary": {"experiment": "canary-c-0002", "percent": 20.0,
                                             "outcome": None}}}  # fmt: skip
        land(store, "checkpoints", [announcement], key="checkpoint_id")
        build_catalog(store)
        check = ab_srm(store, "canary-c-0002")
        assert check is not None and check.expected_share == {"parent": 0.8, "canary": 0.2}
        assert check.srm is fires


def test_invalid_tool_calls_per_interaction_is_read_per_user(tmp_path):
    """The agents' metric: invalid tool calls over all of an arm's interactions, users as units.
    Control: user a has two interactions (2 and 0 invalid calls), b one (1), c one (0): 3 / 4.
    Treatment: three users, one interaction each (0, 0, 1): 1 / 3. The variances are the delta
    method's over users, the interval Fieller's and the p-value the difference's
    (tests/fixtures/ab/README.md), computed here from the per-user sums."""
    import math

    from warehouse.ab import Z95

    template = next(r for r in fixture_records() if r["interaction_id"] == "N1")
    calls = {"control": [("a", 2), ("a", 0), ("b", 1), ("c", 0)],
             "treatment": [("d", 0), ("e", 0), ("f", 1)]}  # fmt: skip
    records = [dict(template, interaction_id=f"{arm}-{k}", user_id=user, n_invalid_tool_calls=n,
                    experiment_name="exp-tools", experiment_arm=arm)
               for arm, rows in calls.items() for k, (user, n) in enumerate(rows)]  # fmt: skip
    store = Store(str(tmp_path))
    land(store, "rewards", records)
    build_catalog(store)
    row = next(r for r in ab_report(store, "exp-tools")
               if r.metric == "invalid_tool_calls_per_interaction")  # fmt: skip

    def ratio_and_variance(units: list[tuple[int, int]]) -> tuple[float, float]:
        """(x, y) per user -> R and the delta-method Var(R) = s^2 / n of (y - R x) / mean x."""
        n, sx, sy = len(units), sum(x for x, _ in units), sum(y for _, y in units)
        r, mean_x = sy / sx, sx / n
        z = [(y - r * x) / mean_x for x, y in units]
        return r, sum(v * v for v in z) / (n - 1) / n  # the z have mean 0

    rc, vc = ratio_and_variance([(2, 2), (1, 1), (1, 0)])
    rt, vt = ratio_and_variance([(1, 0), (1, 0), (1, 1)])
    assert (row.control, row.value) == (pytest.approx(0.75), pytest.approx(1 / 3))
    assert row.relative_change == pytest.approx(rt / rc - 1) == pytest.approx(-5 / 9)
    a, b, c = rc**2 - Z95**2 * vc, rt * rc, rt**2 - Z95**2 * vt
    assert a > 0  # the control (0.75) is told from 0: the interval is finite
    low, high = ((b - s * math.sqrt(b * b - a * c)) / a - 1 for s in (1, -1))
    assert (row.ci_low, row.ci_high) == (pytest.approx(low), pytest.approx(high))
    z = (rt - rc) / math.sqrt(vt + vc)
    assert row.p_value == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
    assert row.n_users == 3 and row.n_interactions == 3
