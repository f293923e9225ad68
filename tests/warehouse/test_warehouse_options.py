"""`rtrl warehouse sink` and `rtrl batches build` take their options from their settings
(SinkConfig, BuildConfig): a new field is an option or declared as given by the command, each
option reaches its field, and no option's default differs from its field's."""

from __future__ import annotations

from typing import Any

import pytest

from infra.settings_cli import SettingsOptions
from infra.topics import TopicNames
from tests.support.settings_options import (
    assert_every_field_is_an_option,
    loaded_by_the_command_line,
    parse,
    subcommand,
)
from warehouse.cli import BUILD_OPTIONS, SINK_OPTIONS
from warehouse.settings import BuildConfig, SinkConfig

GIVEN: dict[str, Any] = {"bootstrap": "k:9092", "root": "wh", "topics": TopicNames("t.")}


@pytest.mark.parametrize(
    ("command", "options"),
    [(("warehouse", "sink"), SINK_OPTIONS), (("batches", "build"), BUILD_OPTIONS)],
)
def test_every_field_is_an_option_of_the_command(
    command: tuple[str, ...], options: SettingsOptions
) -> None:
    assert_every_field_is_an_option(subcommand(*command), options)


def test_the_defaults_are_the_settings_defaults() -> None:
    assert SINK_OPTIONS.read(parse("warehouse", "sink"), **GIVEN) == SinkConfig(**GIVEN)
    assert BUILD_OPTIONS.read(parse("batches", "build")) == BuildConfig()


def test_each_option_reaches_its_field() -> None:
    sink = parse("warehouse", "sink", "--group-id", "g", "--max-rows", "10", "--max-seconds",
                 "0.5", "--once", "--instance-id", "sink-0", "--metrics-port", "9200")  # fmt: skip
    assert SINK_OPTIONS.read(sink, **GIVEN) == SinkConfig(
        **GIVEN, group_id="g", max_rows=10, max_seconds=0.5, once=True, instance_id="sink-0",
        metrics_port=9200,
    )  # fmt: skip
    build = parse("batches", "build", "--min-rows", "5", "--settle-s", "60")
    assert BUILD_OPTIONS.read(build) == BuildConfig(min_rows=5, settle_s=60)


def test_the_options_load_neither_service_nor_duckdb() -> None:
    assert loaded_by_the_command_line("warehouse.sink", "warehouse.batches", "duckdb") == []
