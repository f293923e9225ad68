"""``python -m tests.support.interrupted_cli``: ``rtrl``'s ``main``, its command interrupted
inside a string ``exec``, where CPython marks a KeyboardInterrupt unhandled even once caught (a
SIGTERM that lands during an import does so: dataclasses build their methods with one).

``--bare`` skips ``rtrl``'s ``main``: the same interrupt caught by plain code, which shows that
this interpreter has the behaviour (its process then dies of SIGINT, not 130)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from rtrl import cli

A_COMMAND = ["broker", "status", "--data-dir", "unused"]  # parsed only: its func is replaced


def interrupted(_args: argparse.Namespace) -> int:
    exec("raise KeyboardInterrupt", {})  # noqa: S102 - the interrupt inside a string exec
    return 0


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--bare"]:
        try:
            interrupted(argparse.Namespace())
        except KeyboardInterrupt:
            return 130
        return 0
    parse = cli.parse_args

    def with_interrupted_func(
        parser: argparse.ArgumentParser, argv: Sequence[str], environ: Mapping[str, str]
    ) -> argparse.Namespace:
        parsed = parse(parser, argv, environ)
        parsed.func = interrupted
        return parsed

    cli.parse_args = with_interrupted_func
    return cli.main(A_COMMAND)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
