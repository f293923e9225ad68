"""`rtrl gate evaluate` and `rtrl canary ...`: every field of their settings classes is an
option of the command, and the gate's limits are GateConfig's."""

from __future__ import annotations

from release.cli_options import (
    CANARY_DECIDE_OPTIONS,
    CANARY_EVALUATE_OPTIONS,
    GATE_OPTIONS,
)
from release.gate import GateConfig
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand


def test_every_field_is_an_option_of_its_command() -> None:
    for names, options in (
        (("gate", "evaluate"), GATE_OPTIONS),
        (("canary", "evaluate"), CANARY_EVALUATE_OPTIONS),
        (("canary", "decide"), CANARY_DECIDE_OPTIONS),
    ):
        assert_every_field_is_an_option(subcommand(*names), options)


def test_no_gate_option_gives_the_default_gate() -> None:
    options = GATE_OPTIONS.read(parse("gate", "evaluate"))
    default = GateConfig()
    assert options.config(default.reward_min, default.reward_max) == default


def test_repeated_checkpoints_and_what_ifs_reach_the_canary_settings() -> None:
    args = parse("canary", "evaluate", "--checkpoint", "a", "--checkpoint", "b", "--alpha", "0.1")
    options = CANARY_EVALUATE_OPTIONS.read(args)
    assert options.checkpoint == ["a", "b"]
    assert options.overrides()["alpha"] == 0.1
    assert options.overrides()["margin"] is None
