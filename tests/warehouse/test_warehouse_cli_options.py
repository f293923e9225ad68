"""`rtrl warehouse catalog|compact`, `rtrl batches list`, `rtrl report ab` and `rtrl forget`:
every field of their settings classes is an option of the command, and the options read back
as the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings_cli import SettingsOptions
from tests.support.settings_options import assert_every_field_is_an_option, parse, subcommand
from warehouse.cli_options import (
    AB_REPORT_OPTIONS,
    BATCH_LIST_OPTIONS,
    CATALOG_OPTIONS,
    COMPACT_OPTIONS,
    FORGET_OPTIONS,
    AbReportOptions,
    CatalogOptions,
    CompactOptions,
    ForgetOptions,
)


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (("warehouse", "catalog"), CATALOG_OPTIONS),
        (("warehouse", "compact"), COMPACT_OPTIONS),
        (("batches", "list"), BATCH_LIST_OPTIONS),
        (("report", "ab"), AB_REPORT_OPTIONS),
        (("forget",), FORGET_OPTIONS),
    ],
)
def test_every_field_is_an_option_of_the_command(
    command: tuple[str, ...], options: SettingsOptions
) -> None:
    assert_every_field_is_an_option(subcommand(*command), options)


def test_the_defaults_are_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert CATALOG_OPTIONS.read(parse("warehouse", "catalog")) == CatalogOptions()
    assert COMPACT_OPTIONS.read(parse("warehouse", "compact")) == CompactOptions()
    report = parse("report", "ab", "--experiment", "e")
    assert AB_REPORT_OPTIONS.read(report) == AbReportOptions(experiment="e")
    forget = parse("forget", "--org", "o", "--user-id", "u")
    assert FORGET_OPTIONS.read(forget) == ForgetOptions(org="o", user_id="u")


def test_each_option_reaches_its_field() -> None:
    report = parse("report", "ab", "--warehouse", "wh", "--catalog", "c.duckdb",
                   "--experiment", "e",
                   "--control", "parent", "--weights", "parent=90,canary=10", "--sequential",
                   "--format", "json", "--plot", "ab.svg")  # fmt: skip
    assert AB_REPORT_OPTIONS.read(report) == AbReportOptions(
        root="wh", db="c.duckdb", experiment="e", control="parent", weights="parent=90,canary=10",
        sequential=True, format="json", plot=Path("ab.svg"),
    )  # fmt: skip
    compact = parse("warehouse", "compact", "--bootstrap", "k:9092", "--topic-prefix", "t.",
                    "--group-id", "g", "--all")  # fmt: skip
    assert COMPACT_OPTIONS.read(compact) == CompactOptions(
        bootstrap="k:9092", topic_prefix="t.", group_id="g", all=True
    )
    forget = parse("forget", "--org", "o", "--user-id", "u", "--skip-kafka", "--root", "wh")
    assert FORGET_OPTIONS.read(forget) == ForgetOptions(
        root="wh", org="o", user_id="u", skip_kafka=True
    )
    assert BATCH_LIST_OPTIONS.read(parse("batches", "list", "--offered")).offered
