"""Every `rtrl` command's options as plain data: names, type, default, choices, help.

Why: the commands' options are moved from hand-written ``add_argument`` calls onto typed
settings classes one command at a time; a golden file of what users type and read
(``tests/golden/cli_options.json``), taken before the moves, shows that none changed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path, PurePath
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent


def _plain(value: Any) -> Any:
    """A default as JSON can hold it: paths and other objects by their text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, PurePath):
        return str(value)
    return f"<{type(value).__name__}> {value}"


def _kind(action: argparse.Action) -> str | None:
    if action.type is None:
        return None
    return getattr(action.type, "__name__", type(action.type).__name__)


def _option(action: argparse.Action) -> dict[str, Any]:
    return {
        "flags": list(action.option_strings) or [action.dest],
        "dest": action.dest,
        "action": type(action).__name__,
        "type": _kind(action),
        "default": _plain(action.default),
        "choices": _plain(list(action.choices)) if action.choices is not None else None,
        "nargs": _plain(action.nargs),
        "required": action.required,
        "help": action.help,
    }


def command_options(parser: argparse.ArgumentParser, path: str = "rtrl") -> dict[str, Any]:
    """``{"rtrl serve": [option, ...], ...}`` for the parser and every subcommand below it,
    options in the order ``--help`` lists them."""
    found: dict[str, Any] = {}
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(command_options(sub, f"{path} {name}"))
            continue
        options.append(_option(action))
    found[path] = options
    return dict(sorted(found.items()))


def checkout_free(options: dict[str, Any]) -> dict[str, Any]:
    """The same, with this checkout's path written ``<repo>`` (a default under it, such as
    the schema's file, is the same default in every clone)."""
    return json.loads(json.dumps(options).replace(str(REPO), "<repo>"))
