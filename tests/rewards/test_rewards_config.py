"""The reward configuration: spec defaults, validation, files, and a version that names it."""

from __future__ import annotations

import pydantic
import pytest

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
    version = RewardConfig().reward_version
    assert version.startswith("v1-") and int(version[3:], 16) >= 0 and len(version) == 11
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
