"""`rtrl`: one console script whose subcommands each belong to the package that owns them.

Each stage exposes ``<package>.cli.register(subparsers)``, which adds its subcommands and
sets ``func`` on each to a callable ``(args) -> int``. This module only assembles them and
is the one place (with each stage's ``main`` path) that reads the process environment.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from infra.cli import explain
from infra.kafka_errors import KafkaRefused
from infra.lifetime import dump_stacks_on_signal

# What a user's input causes: said in a sentence, not a traceback.
_USER_ERRORS = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    ValidationError,
)

# The packages whose subcommands make up `rtrl`, in the order `--help` lists them.
STAGES = (
    "infra",
    "ingest",
    "rewards",
    "streams",
    "warehouse",
    "models",
    "checkpoints",
    "serving",
    "otel",
    "trainer",
    "release",
    "console",
    "rtrl.run.loop",
    "rtrl.simulate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtrl",
        description=(
            "Real-time RL from product telemetry: ingest editor events, join them into "
            "rewards, land them in a warehouse, train, gate and ship the next checkpoint."
        ),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in STAGES:
        module = importlib.import_module(name if name.startswith("rtrl.") else f"{name}.cli")
        module.register(sub)
    return parser


# Models load from local files only: a process of the platform never reaches a model hub.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


def main(argv: Sequence[str] | None = None) -> int:
    dump_stacks_on_signal()  # first, before the stages' modules load (seconds under load)
    os.environ.update(OFFLINE)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # A line per HTTP request drowns what the stages say; keep httpx's warnings only (httpx2:
    # the openai client's, which the agent world's users talk through).
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except KafkaRefused as exc:  # an ACL or the credentials: the sentence says which and why
        if args.verbose:
            logging.exception("rtrl %s failed", args.command)
        print(f"rtrl {args.command}: {exc}", file=sys.stderr)
        return 2
    except _USER_ERRORS as exc:
        # A file the user named is missing or unreadable, or a value they gave is out of
        # range (with -v, the traceback too).
        if args.verbose:
            logging.exception("rtrl %s failed", args.command)
        print(f"rtrl {args.command}: {explain(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
