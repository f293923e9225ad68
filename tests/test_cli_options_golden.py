"""Every command keeps the options users know: names, types, defaults, choices and help, as
recorded in ``tests/golden/cli_options.json``. A deliberate change rewrites the file with
``RTRL_UPDATE_GOLDEN=1 pytest tests/test_cli_options_golden.py`` and shows in its diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
