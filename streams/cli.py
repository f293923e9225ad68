"""Subcommands of this stage."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """No subcommands yet."""
