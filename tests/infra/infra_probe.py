"""Test helpers: free port blocks (see `infra.ports`) and the CLI's subcommands."""

from __future__ import annotations

import argparse

from infra.ports import free_port_block

# Kept under its old name for the tests that use it.
quiet_port_block = free_port_block


def rtrl_subcommands() -> tuple[argparse.ArgumentParser, set[str]]:
    """The CLI's parser and the names of the subcommands the packages have registered."""
    from rtrl.cli import build_parser

    parser = build_parser()
    names: set[str] = set()
    for action in parser._actions:  # noqa: SLF001 - argparse exposes no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            names |= set(action.choices)
    return parser, names
