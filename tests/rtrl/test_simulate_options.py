"""`rtrl simulate`: every field of its settings class is an option of the command, and the
options read back as the settings."""

from __future__ import annotations

from rtrl.simulate import SIMULATE_OPTIONS, SimulateSettings
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand


def test_every_field_is_an_option_of_the_command() -> None:
    assert_every_field_is_an_option(subcommand("simulate"), SIMULATE_OPTIONS)


def test_the_options_read_back_as_the_settings() -> None:
    where = ("--gateway", "http://g", "--collector", "http://c", "--org", "o")
    assert SIMULATE_OPTIONS.read(parse("simulate", *where)) == SimulateSettings(
        gateway="http://g", collector="http://c", org="o"
    )
    args = parse("simulate", *where, "--users", "3", "--per-user", "2", "--max-tokens", "9")
    assert SIMULATE_OPTIONS.read(parse("simulate", *where, "--seed", "4")).seed == 4
    assert SIMULATE_OPTIONS.read(args) == SimulateSettings(
        gateway="http://g", collector="http://c", org="o", users=3, per_user=2, max_tokens=9
    )
