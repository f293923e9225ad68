"""One name in every command for the same thing: ``--warehouse`` the warehouse folder,
``--catalog`` its DuckDB file, ``--key-db`` the API keys, ``--reward-config`` the reward
configuration. The names they had before still
work, each use warned on stderr, and none is shown by ``--help``."""

from __future__ import annotations

import argparse

import pytest

from rtrl.cli import build_parser
from tests.support.cli_options import command_options

OLD = ("--root", "--db", "--config")
# (command, old name, new name, the field both fill, its value)
RENAMED = [
    (["batches", "build"], "--root", "--warehouse", "root"),
    (["batches", "build"], "--db", "--catalog", "db"),
    (["batches", "list"], "--root", "--warehouse", "root"),
    (["warehouse", "sink"], "--root", "--warehouse", "root"),
    (["warehouse", "catalog"], "--db", "--catalog", "db"),
    (["warehouse", "compact"], "--root", "--warehouse", "root"),
    (["report", "ab", "--experiment", "e"], "--root", "--warehouse", "root"),
    (["forget", "--org", "o", "--user-id", "u"], "--db", "--catalog", "db"),
    (["console"], "--warehouse", "--catalog", "warehouse"),
    (["collector"], "--db", "--key-db", "key_db"),
    (["serve"], "--db", "--key-db", "key_db"),
    (["keys", "list"], "--db", "--key-db", "key_db"),
    (["stream", "worker"], "--config", "--reward-config", "config"),
    (
        ["replay", "--events", "e.jsonl", "--out", "o.parquet"],
        "--config",
        "--reward-config",
        "config",
    ),
]


def test_no_command_shows_an_old_name() -> None:
    for command, options in command_options(build_parser()).items():
        if command == "rtrl":  # `rtrl --config`: the loop's configuration, before any command
            continue
        shown = {flag for option in options if option["help"] != argparse.SUPPRESS
                 for flag in option["flags"]}  # fmt: skip
        assert not shown & set(OLD), command
        if command == "rtrl console":
            assert "--warehouse" not in shown, "the console's catalog is --catalog"


@pytest.mark.parametrize(("argv", "old", "new", "dest"), RENAMED, ids=lambda v: str(v))
def test_an_old_name_still_works_and_says_the_new_one(
    argv: list[str], old: str, new: str, dest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser()
    by_old = parser.parse_args([*argv, old, "x.duckdb"])
    assert f"{old} is the old name of {new}; use {new}" in capsys.readouterr().err
    by_new = parser.parse_args([*argv, new, "x.duckdb"])
    assert capsys.readouterr().err == ""
    assert str(getattr(by_old, dest)) == str(getattr(by_new, dest)) == "x.duckdb"
    default = parser.parse_args(argv)
    assert getattr(default, dest) != "x.duckdb"  # the old name's absence leaves the default
