"""The one configuration on the command line: its settings made the defaults of the options
that name them (``apply_config``), and `rtrl config show`, which says what each setting is and
which commands' options it reaches."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

from infra.settings_cli import add_group
from rtrl.loop_config import ENV


def subcommands(
    parser: argparse.ArgumentParser, path: str = "rtrl"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command below ``parser`` that runs something, by its full name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                below = list(subcommands(sub, f"{path} {name}"))
                yield from below or [(f"{path} {name}", sub)]


def apply_config(parser: argparse.ArgumentParser, by_flag: dict[str, Any]) -> list[dict[str, Any]]:
    """Each value of ``by_flag`` made the default of the option with that flag in every command
    (as text, which argparse parses with the option's own type, as if typed); an option shown
    by --help only: an old name is never a target. What was set, a row per command and flag."""
    applied = []
    for command, sub in subcommands(parser):
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for flag in set(action.option_strings) & set(by_flag):
                action.default = str(by_flag[flag])
                action.help = f"{action.help or ''} [configured: {by_flag[flag]}]".lstrip()
                applied.append({"command": command, "flag": flag, "value": str(by_flag[flag])})
    return applied


def register(sub: argparse._SubParsersAction) -> None:
    csub = add_group(
        sub,
        "config",
        help="the one configuration every service reads (rtrl --config FILE, or $RTRL_CONFIG)",
        description="A TOML file of [kafka], [paths], [reward], [monitors], [batches], [trainer] "
        "and [serving] settings, each the default of the options that name it in every command "
        "(docs/operations.md lists them). A setting that cannot work is refused when any "
        "command starts.",
    )
    show = csub.add_parser("show", help="each setting of the configuration and where it goes")
    show.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    config, applied = getattr(args, "loop_config", None), getattr(args, "config_applied", [])
    if config is None:
        print(f"no configuration: give rtrl --config FILE or set ${ENV}; each command keeps "
              "its own defaults")  # fmt: skip
        return 0
    if args.json:
        print(json.dumps({"file": args.config_file, "settings": config.model_dump(mode="json"),
                          "settle_s": config.settle_s, "applied": applied}, indent=1))  # fmt: skip
        return 0
    print(f"configuration {args.config_file}; batches settle {config.settle_s} s")
    by_flag: dict[tuple[str, str], list[str]] = {}
    for row in applied:
        by_flag.setdefault((row["flag"], row["value"]), []).append(row["command"])
    for (flag, value), commands in sorted(by_flag.items()):
        print(f"  {flag} {value}: {', '.join(sorted(commands))}")
    return 0
