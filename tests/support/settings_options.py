"""A command's options against the settings classes they come from (``infra.settings_cli``):
every field is an option of the command, or one the command declares it gives itself."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

from infra.settings_cli import SettingsOptions
from rtrl.cli import build_parser


def subcommand(*names: str) -> argparse.ArgumentParser:
    """The parser of ``rtrl NAMES...`` (``serve``; ``warehouse``, ``sink``)."""
    parser = build_parser()
    for name in names:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def assert_every_field_is_an_option(
    parser: argparse.ArgumentParser, options: SettingsOptions
) -> None:
    cls = options.cls
    fields = (
        {f.name for f in dataclasses.fields(cls)}
        if dataclasses.is_dataclass(cls)
        else set(cls.model_fields)
    )
    assert set(options.flags) | options.omitted == fields, cls.__name__
    # a positional by its name (its dest), as SettingsOptions.flags names it
    on_parser = {f for action in parser._actions for f in action.option_strings or [action.dest]}
    missing = {name: f for name, f in options.flags.items() if not set(f) <= on_parser}
    assert not missing, f"{cls.__name__}: not options of `{parser.prog}`: {missing}"


def loaded_by_the_command_line(*modules: str) -> list[str]:
    """Which of ``modules`` building the ``rtrl`` command line imports (in a fresh process): the
    settings its options come from are kept apart from what their services import."""
    code = (
        "import sys, rtrl.cli; rtrl.cli.build_parser(); "
        f"print(sorted(m for m in {modules!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(eval(out.stdout))
