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
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from infra.cli import explain
from infra.kafka_errors import KafkaRefused
from infra.lifetime import dump_stacks_on_signal, forget_interrupt_in_string_exec
from rtrl.config_cli import apply_config
from rtrl.loop_config import ENV, load_loop_config

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
    "rtrl.up",
    "rtrl.config_cli",
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
    parser.add_argument(
        "--config",
        dest="config_file",
        default=None,
        help=f"the loop's one configuration (TOML; default ${ENV}): its settings are the "
        "defaults of the options that name them (`rtrl config show`)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in STAGES:
        module = importlib.import_module(name if name.startswith("rtrl.") else f"{name}.cli")
        module.register(sub)
    return parser


# Models load from local files only: a process of the platform never reaches a model hub.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


def config_file(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The configuration `rtrl` is given: ``--config FILE`` before the command's name, else
    ``$RTRL_CONFIG``. Read ahead of parsing, so that even ``--help`` shows its settings.

    >>> config_file(["-v", "--config", "a.toml", "train", "--config", "b"], {})
    'a.toml'
    >>> config_file(["stream", "worker", "--config", "r.toml"], {"RTRL_CONFIG": "c.toml"})
    'c.toml'
    """
    tokens = iter(argv)
    for token in tokens:
        if token == "--config":
            return next(tokens, None)
        if token.startswith("--config="):
            return token.partition("=")[2]
        if not token.startswith("-"):  # the command: what follows is its own
            break
    return environ.get(ENV) or None


def parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str], environ: Mapping[str, str]
) -> argparse.Namespace:
    """The command line under the loop's configuration where one is named: its settings made
    the options' defaults before parsing, so that an option given still wins. Raises what
    reading or validating the file raises (a setting that cannot work: pydantic's
    ValidationError, with the reason)."""
    file = config_file(argv, environ)
    config, applied = None, []
    if file:
        config = load_loop_config(file)
        applied = apply_config(parser, config.by_flag(Path(file)))
    args = parser.parse_args(argv)
    args.config_file, args.loop_config, args.config_applied = file, config, applied
    return args


def main(argv: Sequence[str] | None = None) -> int:
    dump_stacks_on_signal()  # first, before the stages' modules load (seconds under load)
    os.environ.update(OFFLINE)
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(parser, argv, os.environ)
    except (OSError, ValidationError, tomllib.TOMLDecodeError) as exc:
        file = config_file(argv, os.environ)
        print(f"rtrl: the configuration {file} cannot work: {explain(exc)}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # A line per HTTP request drowns what the stages say; keep httpx's warnings only (httpx2:
    # the openai client's, which the agent world's users talk through).
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for warning in args.loop_config.warnings() if args.loop_config else ():
        logging.getLogger("rtrl").warning("configuration: %s", warning)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        forget_interrupt_in_string_exec()  # else `python -m rtrl.cli` may exit -2, not 130
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
