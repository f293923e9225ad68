"""`rtrl models fetch|list`: every field of their settings classes is an option of the command,
and the options read back as the settings."""

from __future__ import annotations

from models.cli import FETCH_OPTIONS, LIST_OPTIONS, FetchOptions, ListOptions
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand


def test_every_field_is_an_option_of_its_command() -> None:
    assert_every_field_is_an_option(subcommand("models", "fetch"), FETCH_OPTIONS)
    assert_every_field_is_an_option(subcommand("models", "list"), LIST_OPTIONS)


def test_the_options_read_back_as_the_settings() -> None:
    assert FETCH_OPTIONS.read(parse("models", "fetch", "tiny")) == FetchOptions("tiny")
    assert LIST_OPTIONS.read(parse("models", "list")) == ListOptions()
    assert LIST_OPTIONS.read(parse("models", "list", "--json")) == ListOptions(json=True)
