"""`rtrl run`: the whole loop, locally, on embedded defaults."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Registered once the loop exists."""
