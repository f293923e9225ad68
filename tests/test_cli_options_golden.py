"""Every command keeps the options users know: names, types, defaults, choices and help, as
recorded in ``tests/golden/cli_options.json``. A deliberate change rewrites the file with
``RTRL_UPDATE_GOLDEN=1 pytest tests/test_cli_options_golden.py`` and shows in its diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rtrl.cli import build_parser
from tests.support.cli_options import checkout_free, command_options

GOLDEN = Path(__file__).parent / "golden" / "cli_options.json"


def test_every_command_keeps_its_options() -> None:
    now = checkout_free(command_options(build_parser()))
    if os.environ.get("RTRL_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(GOLDEN.read_text())
    assert sorted(now) == sorted(recorded), "commands added or removed"
    for command, options in recorded.items():
        assert now[command] == options, command


def test_the_golden_file_covers_the_commands_users_run() -> None:
    recorded = json.loads(GOLDEN.read_text())
    for command in ("rtrl run", "rtrl serve", "rtrl stream worker", "rtrl collector"):
        assert command in recorded, command
    assert sum(len(v) for v in recorded.values()) > 250


def test_every_command_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    """A help with a stray ``%`` (argparse formats every help) breaks ``--help`` only when it
    is asked for: every command is asked here."""
    commands = json.loads(GOLDEN.read_text())
    for command in commands:
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([*command.split()[1:], "--help"])
        assert done.value.code == 0, command
        assert "usage: " + command in capsys.readouterr().out, command
