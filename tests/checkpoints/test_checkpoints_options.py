"""`rtrl checkpoints ...`: every field of their settings classes is an option of the command."""

from __future__ import annotations

import pytest

from checkpoints.cli_options import (
    ANNOUNCE_OPTIONS,
    INIT_OPTIONS,
    LIST_OPTIONS,
    ROLLBACK_OPTIONS,
)
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand


def test_every_field_is_an_option_of_its_command() -> None:
    for name, options in (
        ("init", INIT_OPTIONS),
        ("rollback", ROLLBACK_OPTIONS),
        ("announce", ANNOUNCE_OPTIONS),
        ("list", LIST_OPTIONS),
    ):
        assert_every_field_is_an_option(subcommand("checkpoints", name), options)


def test_a_required_option_is_refused_when_missing_and_read_when_given() -> None:
    with pytest.raises(SystemExit):
        parse("checkpoints", "init", "--id", "smol-0000")
    options = INIT_OPTIONS.read(parse("checkpoints", "init", "--id", "smol-0000", "--model", "m"))
    assert (options.id, options.model, options.publish) == ("smol-0000", "m", False)
