"""The eval gate: each rule alone rejects with its own sentence; all together pass."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from release.gate import GateConfig, decide
from release.offpolicy_bound import METHOD, Estimate
from rewards.monitors import Alarm, MetricThreshold

GOOD = Estimate(
    value=0.55, behaviour_mean=0.50, ess=60.0, kl=0.2, n=100, users=30, lower=0.01, resamples=2000
)


def alarm(metric: str = "edit_rate") -> Alarm:
    return Alarm(
        checkpoint="c2",
        parent="c1",
        metric=metric,
        parent_value=0.4,
        value=0.2,
        change=-0.5,
        threshold=MetricThreshold(),
        message=f"{metric} of c2 fell",
    )


def test_a_good_candidate_passes_with_its_figures() -> None:
    decision = decide(GOOD, [], GateConfig())
    assert decision.passed and decision.reasons == ()
    assert decision.figures["gain"] == pytest.approx(0.05)
    assert decision.figures["ess_fraction"] == pytest.approx(0.6)
    assert decision.figures["n"] == 100 and decision.figures["alarms"] == 0
    assert decision.figures["lower"] == 0.01 and decision.figures["level"] == 0.95
    assert decision.figures["method"] == METHOD == "clipped-is-user-cr2-ik-t"
    assert decision.figures["users"] == 30


@pytest.mark.parametrize("change, reason", [
    ({"lower": -0.001}, "gain 0.050, its 95% lower bound -0.001 not above 0.000"),
    ({"lower": 0.0}, "gain 0.050, its 95% lower bound 0.000 not above 0.000"),
    ({"kl": 1.5}, "KL 1.500 above 1.000"),
    ({"ess": 12.0}, "ESS 12 of 100 below 20%"),
    ({"n": 30, "ess": 20.0}, "30 examples, fewer than the 50 needed"),
    ({"users": 9}, "9 users, fewer than the 10 needed"),
    ({"value": math.nan}, "estimate not finite: value=nan"),
])  # fmt: skip
def test_each_rule_alone_rejects_with_its_reason(change: dict, reason: str) -> None:
    decision = decide(dataclasses.replace(GOOD, **change), [], GateConfig())
    assert not decision.passed
    assert reason in decision.reasons
    if not any(math.isnan(v) for v in change.values()):
        assert decision.reasons == (reason,)


def test_rules_hold_at_their_limits() -> None:
    config = GateConfig(min_gain=0.0099, max_kl=0.2, min_ess_fraction=0.6, min_examples=100,
                        min_users=30)  # fmt: skip
    assert decide(GOOD, [], config).passed  # every other figure exactly at its limit


def test_a_negative_margin_allows_a_small_loss() -> None:
    worse = dataclasses.replace(GOOD, value=0.49, lower=-0.015)
    assert not decide(worse, [], GateConfig()).passed
    assert decide(worse, [], GateConfig(min_gain=-0.02)).passed


def test_alarms_block_only_when_configured() -> None:
    alarms = [alarm("edit_rate"), alarm("censored_share")]
    blocked = decide(GOOD, alarms, GateConfig())
    assert not blocked.passed
    assert blocked.reasons == (
        "monitor alarm: edit_rate of c2 fell",
        "monitor alarm: censored_share of c2 fell",
    )
    allowed = decide(GOOD, alarms, GateConfig(block_on_alarms=False))
    assert allowed.passed and allowed.figures["alarms"] == 2


@pytest.mark.parametrize("field, value", [
    ("min_gain", math.inf), ("max_kl", -0.1), ("min_ess_fraction", 1.5),
    ("min_examples", 0), ("min_examples", 2.0), ("block_on_alarms", 1), ("min_users", 0),
    ("weight_cap", 0.5), ("reward_min", 3.0), ("reward_max", math.nan),
])  # fmt: skip
def test_gate_config_refuses_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"GateConfig.{field}"):
        GateConfig(**{field: value})  # type: ignore[arg-type]


estimates = st.builds(
    Estimate,
    value=st.floats(0, 1), behaviour_mean=st.floats(0, 1), ess=st.floats(1, 200),
    kl=st.floats(0, 3), n=st.integers(1, 200), users=st.integers(1, 200), lower=st.floats(-1, 1),
)  # fmt: skip
configs = st.builds(
    GateConfig,
    min_gain=st.floats(-0.5, 0.5), max_kl=st.floats(0, 3), min_ess_fraction=st.floats(0, 1),
    min_examples=st.integers(1, 200), min_users=st.integers(1, 200),
)  # fmt: skip


@given(
    estimates, configs, st.floats(0, 0.5), st.floats(0, 1), st.floats(0, 0.5), st.integers(0, 50)
)
def test_a_stricter_gate_never_passes_what_a_looser_one_failed(
        estimate: Estimate, config: GateConfig, more_gain: float, less_kl: float,
        more_ess: float, more_examples: int) -> None:  # fmt: skip
    stricter = GateConfig(min_gain=config.min_gain + more_gain,
                          max_kl=config.max_kl * less_kl,
                          min_ess_fraction=min(1.0, config.min_ess_fraction + more_ess),
                          min_examples=config.min_examples + more_examples,
                          min_users=config.min_users + more_examples)  # fmt: skip
    loose, strict = decide(estimate, [], config), decide(estimate, [], stricter)
    assert loose.passed == (not loose.reasons)
    if not loose.passed:
        assert not strict.passed
        assert len(strict.reasons) >= len(loose.reasons)


def test_the_gate_loads_without_torch() -> None:
    code = "import sys, release.gate; print('torch' in sys.modules, 'polars' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
