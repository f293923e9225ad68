"""The A/B report against a fixture computed by hand (tests/fixtures/ab/README.md)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree

import pytest

from rewards.config import RewardConfig
from rewards.function import compute_record
from tests.warehouse_fixtures import land
from warehouse.ab import RatioSums, median_with_variance, relative_change
from warehouse.catalog import build_catalog
from warehouse.report import METRICS, ab_report, render
from warehouse.report_plot import plot_ab
from warehouse.store import Store

FIXTURE = Path(__file__).with_name("fixtures") / "ab"


def fixture_events() -> list[dict]:
    return [json.loads(line) for line in (FIXTURE / "events.jsonl").read_text().splitlines()]


def fixture_records() -> list[dict]:
    by_id: dict[str, list[dict]] = defaultdict(list)
    for event in fixture_events():
        by_id[event["interaction_id"]].append(event)
    return [compute_record(evs, RewardConfig()).to_json_dict() for evs in by_id.values()]


def assert_matches_expected(rows) -> None:  # noqa: ANN001
    expected = json.loads((FIXTURE / "expected.json").read_text())
    got = {r.metric: r for r in rows}
    assert set(got) == set(expected["metrics"])
    for metric, want in expected["metrics"].items():
        row = got[metric]
        assert (row.arm, row.control_arm, row.n_users, row.n_interactions) == (
            expected["arm"],
            expected["control"],
            expected["n_users"],
            expected["n_interactions"],
        )
        for field, value in want.items():
            assert getattr(row, field) == pytest.approx(value, rel=1e-9, abs=1e-12), (metric, field)


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
    assert json.loads(render(rows, "json"))[0]["experiment"] == "exp-fixture"

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
