"""The A/B report's false alarms on data with no signal, across its metrics and across
refreshes: Holm keeps the chance of *any* false alarm among five metrics at alpha, and the
anytime-valid intervals keep it across a mart refreshed and read twenty times.

The simulation mirrors the mart: per-user sums of five ratio metrics (two arms of one
experiment, users of 1 + Poisson(2) interactions, the metrics correlated through each user's
activity), compared with ``warehouse.ab`` and adjusted with ``stats.multiple.holm``, the very
functions ``warehouse/ab_mart.py`` fills ``ab_report`` with.
"""

from __future__ import annotations

import math

import numpy as np

from stats.multiple import holm
from warehouse.ab import RatioSums, relative_change, sequential_change

ALPHA = 0.05
TRIALS = 400
METRIC_RATES = (0.3, 0.1, 0.5, 0.2, 0.7)  # five null metrics, the same in both arms


def _noise(rate: float) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / TRIALS)


def _sums(x: np.ndarray, y: np.ndarray) -> RatioSums:
    return RatioSums(len(x), float(x.sum()), float(y.sum()), float((x * x).sum()),
                     float((y * y).sum()), float((x * y).sum()))  # fmt: skip


def _arm(rng: np.random.Generator, users: int) -> tuple[np.ndarray, list[np.ndarray]]:
    x = 1 + rng.poisson(2.0, size=users)
    return x.astype(float), [rng.binomial(x, p).astype(float) for p in METRIC_RATES]


def _p_values(t: tuple, c: tuple, upto: int | None = None, sequential: bool = False) -> list:
    (xt, yts), (xc, ycs) = t, c
    xt, xc = xt[:upto], xc[:upto]
    out = []
    for yt, yc in zip(yts, ycs, strict=True):
        st, sc = _sums(xt, yt[:upto]), _sums(xc, yc[:upto])
        args = (st.estimate(), st.variance(), sc.estimate(), sc.variance())
        change = sequential_change(*args, st.n + sc.n) if sequential else relative_change(*args)
        out.append(change.p_value)
    return out


def test_holm_keeps_the_family_wise_false_alarm_rate_across_five_metrics():
    rng = np.random.default_rng(21)
    any_raw = any_holm = 0
    for _ in range(TRIALS):
        p = _p_values(_arm(rng, 400), _arm(rng, 400))
        any_raw += min(p) < ALPHA
        any_holm += min(q for q in holm(p) if q is not None) < ALPHA
    print(f"any false alarm of 5 null metrics: {any_raw / TRIALS:.3f} raw, "
          f"{any_holm / TRIALS:.3f} Holm (nominal {ALPHA})")  # fmt: skip
    assert any_holm / TRIALS <= ALPHA + _noise(ALPHA), any_holm
    assert any_raw / TRIALS > ALPHA + _noise(ALPHA)  # what the correction is for


def test_anytime_intervals_keep_their_level_over_twenty_refreshes():
    """One metric, a mart refreshed as users arrive (20 refreshes of 100 users per arm each):
    the share of experiments where any refresh shows a significant change."""
    rng = np.random.default_rng(22)
    fixed = anytime = 0
    for _ in range(TRIALS):
        t, c = _arm(rng, 2000), _arm(rng, 2000)
        looks = range(100, 2001, 100)
        fixed += any(_p_values(t, c, n)[0] < ALPHA for n in looks)
        anytime += any(_p_values(t, c, n, sequential=True)[0] < ALPHA for n in looks)
    print(f"any significant refresh of 20: {fixed / TRIALS:.3f} fixed-sample, "
          f"{anytime / TRIALS:.3f} anytime-valid (nominal {ALPHA})")  # fmt: skip
    assert anytime / TRIALS <= ALPHA + _noise(ALPHA), anytime
    assert fixed / TRIALS > ALPHA + _noise(ALPHA)  # what the sequence is for


def test_holm_and_anytime_p_values_together_keep_the_family_across_refreshes():
    rng = np.random.default_rng(23)
    alarms = 0
    for _ in range(TRIALS // 2):
        t, c = _arm(rng, 1000), _arm(rng, 1000)
        alarms += any(
            min(q for q in holm(_p_values(t, c, n, sequential=True)) if q is not None) < ALPHA
            for n in range(100, 1001, 100)
        )
    rate = alarms / (TRIALS // 2)
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / (TRIALS // 2)), rate


def test_the_mart_and_the_report_state_the_correction_and_the_sequence(tmp_path, capsys):
    """The ``ab_report`` mart holds Holm's adjustment of its report's p-values, and the
    anytime-valid interval around the fixed-sample one; the table says which it shows."""
    from tests.support.warehouse import land
    from tests.warehouse.support import fixture_events, fixture_records
    from warehouse.__main__ import main
    from warehouse.catalog import build_catalog
    from warehouse.report import ab_report
    from warehouse.store import Store

    store = Store(str(tmp_path))
    land(store, "events", fixture_events())
    land(store, "rewards", fixture_records(), partition=2)
    build_catalog(store)
    rows = ab_report(store, "exp-fixture")
    assert [r.p_holm for r in rows] == holm([r.p_value for r in rows])
    assert [r.seq_p_holm for r in rows] == holm([r.seq_p_value for r in rows])
    # the median's interval counts interactions, not users: no anytime-valid one
    medians = [r for r in rows if r.metric == "latency_p50_ms"]
    assert medians and all(r.p_value is not None for r in medians)
    assert all(r.seq_ci_low is None and r.seq_p_value is None for r in medians)
    for r in rows:
        if r.ci_low is not None and r.seq_ci_low is not None:
            assert r.seq_ci_low <= r.ci_low <= r.ci_high <= r.seq_ci_high
            assert r.seq_p_value >= r.p_value
    args = ["report", "ab", "--warehouse", str(tmp_path), "--experiment", "exp-fixture"]
    assert main(args) == 0
    fixed = capsys.readouterr().out
    assert "95 % CI" in fixed and "p (Holm)" in fixed and "fixed-sample" in fixed
    assert main([*args, "--sequential"]) == 0
    sequential = capsys.readouterr().out
    assert "anytime 95 % CS" in sequential and "anytime-valid" in sequential
