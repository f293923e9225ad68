"""`rtrl schema export|validate`: every field of their settings classes is an option of the
command, and the options read back as the settings."""

from __future__ import annotations

from pathlib import Path

from ingest.cli import (
    SCHEMA_EXPORT_OPTIONS,
    SCHEMA_VALIDATE_OPTIONS,
    SchemaExportOptions,
    SchemaValidateOptions,
)
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand


def test_every_field_is_an_option_of_its_command() -> None:
    assert_every_field_is_an_option(subcommand("schema", "export"), SCHEMA_EXPORT_OPTIONS)
    validate = subcommand("schema", "validate")
    assert_every_field_is_an_option(validate, SCHEMA_VALIDATE_OPTIONS)


def test_the_options_read_back_as_the_settings() -> None:
    export = SCHEMA_EXPORT_OPTIONS
    assert export.read(parse("schema", "export")) == SchemaExportOptions()
    checked = parse("schema", "export", "--out", "s.json", "--check")
    assert export.read(checked) == SchemaExportOptions(out=Path("s.json"), check=True)
    validate = parse("schema", "validate", "-", "--origin", "collected")
    assert SCHEMA_VALIDATE_OPTIONS.read(validate) == SchemaValidateOptions("-", "collected")
    assert SCHEMA_VALIDATE_OPTIONS.read(parse("schema", "validate", "e.jsonl")).origin == "client"
