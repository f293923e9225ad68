"""Old option names that still work: each is read into its new option's value and warned about
on stderr, and hidden from ``--help``, so that users' scripts keep running while they learn the
one name every command now uses for the same thing (``--warehouse`` for the warehouse folder,
``--catalog`` for its DuckDB file, ``--key-db`` for the API keys).

>>> p = argparse.ArgumentParser(prog="rtrl x")
>>> _ = p.add_argument("--warehouse", default=None)
>>> add_old_flags(p, ("--root",), "--warehouse", dest="warehouse")
>>> import contextlib, io
>>> err = io.StringIO()
>>> with contextlib.redirect_stderr(err):
...     args = p.parse_args(["--root", "wh"])
>>> args.warehouse, err.getvalue().strip()
('wh', 'rtrl x: --root is the old name of --warehouse; use --warehouse')
>>> p.parse_args([]).warehouse is None
True
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class _OldName(argparse.Action):
    """Stores the value as the new option would, after saying which name to use."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "", **kw: Any):
        super().__init__(option_strings, dest, **kw)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog}: {option_string} is the old name of {self.new}; use {self.new}",
              file=sys.stderr)  # fmt: skip
        setattr(namespace, self.dest, values)


def add_old_flags(
    parser: argparse.ArgumentParser,
    old: Sequence[str],
    new: str,
    *,
    dest: str,
    type: Any = None,
    nargs: str | None = None,
) -> None:
    """Each of ``old`` read into ``dest`` (the option ``new``'s) with a warning, not in the help.
    Its default is argparse's SUPPRESS, so the new option's default stands when it is absent."""
    if not old:
        return
    parser.add_argument(*old, dest=dest, type=type, nargs=nargs, action=_OldName, new=new,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # fmt: skip
