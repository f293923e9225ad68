"""The reward configuration: spec defaults, validation, files, and a version that names it."""

from __future__ import annotations

import hashlib
import re

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards import terms
from rewards.config import RewardConfig, load_config

SPEC_DEFAULTS = {
    "window_s": 1800, "late_s": 1800, "grace_s": 5, "remember_closed_s": 7 * 86400,
    "accept": 1.0, "reject": -0.5, "revert": -1.0, "retain_weight": 1.0,
    "followup_dissatisfied": -1.0, "invalid_tool_call": -0.5, "invalid_tool_floor": -2.0,
    "clarify": -0.25, "clarify_floor": -1.0, "latency": -0.1, "latency_scale_ms": 10_000,
    "reward_decimals": 6,
}  # fmt: skip


def test_defaults_are_the_spec_numbers():
    fields = RewardConfig().model_dump()
    assert fields.pop("flaw") == "none"  # the one field outside the spec: no flaw by default
    assert fields == SPEC_DEFAULTS


def test_the_spec_defaults_keep_their_version():
    # the version records in the wild carry: a new non-spec field must not rename it
    assert RewardConfig().reward_version == "v1-d73c1d00"
    assert RewardConfig(flaw="none").reward_version == "v1-d73c1d00"
    assert RewardConfig(flaw="free-deferral").reward_version != "v1-d73c1d00"


def test_version_is_v1_and_8_hex_digits_and_stable():
    config = RewardConfig()
    version = config.reward_version
    assert re.fullmatch(r"v1-[0-9a-f]{8}", version), version
    assert version[3:] == hashlib.sha256(config.canonical_json().encode()).hexdigest()[:8]
    assert RewardConfig(**SPEC_DEFAULTS).reward_version == version


@pytest.mark.parametrize(
    "bad",
    [{"window_s": 0}, {"late_s": -1}, {"revert": 0.5}, {"invalid_tool_floor": 1.0},
     {"reject": 2.0}, {"remember_closed_s": 100}, {"latency_scale_ms": 0}, {"unknown": 1}],
)  # fmt: skip
def test_invalid_configs_are_refused(bad):
    with pytest.raises(pydantic.ValidationError):
        RewardConfig(**bad)


def test_config_is_frozen():
    with pytest.raises(pydantic.ValidationError):
        RewardConfig().window_s = 60


def test_load_json_toml_yaml_give_the_same_config(tmp_path):
    (tmp_path / "a.json").write_text('{"reject": -0.75, "window_s": 900}')
    (tmp_path / "b.toml").write_text("[reward]\nreject = -0.75\nwindow_s = 900\n")
    (tmp_path / "c.yml").write_text("reject: -0.75\nwindow_s: 900\n")
    configs = [load_config(tmp_path / name) for name in ("a.json", "b.toml", "c.yml")]
    assert configs[0] == configs[1] == configs[2] == RewardConfig(reject=-0.75, window_s=900)
    assert len({c.reward_version for c in configs}) == 1


def test_load_refuses_unknown_formats_and_fields(tmp_path):
    (tmp_path / "a.ini").write_text("x")
    with pytest.raises(ValueError):
        load_config(tmp_path / "a.ini")
    (tmp_path / "b.json").write_text('{"rejct": -0.75}')
    with pytest.raises(pydantic.ValidationError):
        load_config(tmp_path / "b.json")


_penalty = st.floats(-3.0, 0.0, allow_nan=False).map(lambda v: round(v, 7))
_weight = st.floats(-3.0, 3.0, allow_nan=False).map(lambda v: round(v, 7))
_edit = st.tuples(st.sampled_from([terms.ACCEPTED, terms.REJECTED, None]), st.booleans(),
                  st.one_of(st.none(), st.floats(0.0, 1.0)))  # fmt: skip


@st.composite
def _configs(draw: st.DrawFn) -> RewardConfig:
    accept, reject = sorted((draw(_weight), draw(_weight)), reverse=True)
    return RewardConfig(
        accept=accept, reject=reject, revert=draw(_penalty),
        retain_weight=draw(st.floats(0.0, 3.0).map(lambda v: round(v, 7))),
        followup_dissatisfied=draw(_penalty), invalid_tool_call=draw(_penalty),
        invalid_tool_floor=draw(_penalty), clarify=draw(_penalty), clarify_floor=draw(_penalty),
        latency=draw(_penalty), reward_decimals=draw(st.integers(0, 9)),
    )  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(config=_configs(), edits=st.lists(_edit, max_size=4), dissatisfied=st.booleans(),
       invalid=st.integers(0, 12), clarifying=st.integers(0, 12),
       latency_ms=st.one_of(st.none(), st.integers(0, 60_000)))  # fmt: skip
def test_every_reward_lies_in_the_configurations_range(config, edits, dissatisfied, invalid,
                                                       clarifying, latency_ms):  # fmt: skip
    """The range the release gate shifts rewards by holds every reward the terms can sum to,
    under any weights a team may set."""
    low, high = config.reward_range()
    reward = terms.total(
        [
            terms.r_edit(terms.edit_score(d, rev, f, config) for d, rev, f in edits),
            terms.r_followup(dissatisfied, config),
            terms.r_tool(invalid, config),
            terms.r_clarify(clarifying, len(edits), config),
            terms.r_latency(latency_ms, config),
        ],
        config,
    )
    assert low <= reward <= high


def test_the_range_is_reached_at_both_ends():
    """reward v1's defaults: an accepted, fully retained edit is the best; an empty window with
    every penalty at its floor the worst (the clarifying floor, not an edit's, since -1 < -0.5)."""
    config = RewardConfig()
    best = [terms.r_edit([terms.edit_score(terms.ACCEPTED, False, 1.0, config)]), 0.0, 0.0, 0.0,
            0.0]  # fmt: skip
    worst = [0.0, terms.r_followup(True, config), terms.r_tool(9, config),
             terms.r_clarify(9, 0, config), terms.r_latency(60_000, config)]  # fmt: skip
    assert (terms.total(worst, config), terms.total(best, config)) == config.reward_range()
