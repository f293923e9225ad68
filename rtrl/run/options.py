"""The options of `rtrl run`, one per field of :class:`rtrl.run.settings.RunSettings`.

The options are older than their fields; each one written differently from what a field derives
(``infra.settings_cli``) is declared here so that it stays as users know it: the positive
integers, the choices and plain text of the options that had no type, the options without a
help, and ``--engine-exact``'s ``--no-engine-exact``.
"""

from __future__ import annotations

import argparse

from infra.cli import positive_int
from infra.settings_cli import Option, SettingsOptions
from rtrl.run.settings import RunSettings
from rtrl.worlds.scenarios import SCENARIOS

_AS_TYPED = Option(verbatim=True)  # no type (the text as typed), no help, or no default shown
_POSITIVE = Option(type=positive_int)

RUN_OPTIONS = SettingsOptions(
    RunSettings,
    options={
        "collector_port": Option(verbatim=True, type=int),
        "interactions": Option(verbatim=True, type=positive_int),
        "world": _AS_TYPED,
        "round_users": _POSITIVE,
        "max_tokens": _POSITIVE,
        "agent_calls": _POSITIVE,
        "gateway_port": Option(verbatim=True, type=int),
        "engine": _AS_TYPED,
        "engine_slots": _POSITIVE,
        "engine_exact": Option(action=argparse.BooleanOptionalAction),
        "seed": Option(verbatim=True, type=int),
        "users": _AS_TYPED,
        "scenario": Option(verbatim=True, choices=sorted(SCENARIOS)),
        "model": _AS_TYPED,
        "window_s": _POSITIVE,
    },
)


def add_run_options(p: argparse.ArgumentParser) -> None:
    RUN_OPTIONS.add_to(p)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The settings the options say: the one place `rtrl run` reads its parsed arguments."""
    return RUN_OPTIONS.read(args)
