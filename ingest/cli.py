"""Subcommands of the ingest stage: the event contract's `rtrl schema`, and the collector's
`rtrl collector` and `rtrl keys`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from ingest.contract import ContractError, Origin, parse_event
from ingest.contract.schema import SCHEMA_PATH, is_stale, write_schema


def register(sub: argparse._SubParsersAction) -> None:
    """Add `schema` (export, validate), `collector` and `keys`."""
    from ingest.collector.cli import register_collector

    register_collector(sub)
    schema = sub.add_parser(
        "schema",
        help="export the event JSON Schema or validate events against the contract",
        description="The telemetry event contract (version 1) as JSON Schema, and a validator.",
    )
    actions = schema.add_subparsers(dest="schema_command", metavar="ACTION", required=True)

    export = actions.add_parser(
        "export",
        help="write the JSON Schema of an event",
        description="Render the JSON Schema from the code and write it, or check it is current.",
    )
    export.add_argument(
        "--out", type=Path, default=SCHEMA_PATH, help=f"where to write (default: {SCHEMA_PATH})"
    )
    export.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the file is stale"
    )
    export.set_defaults(func=_export)

    validate = actions.add_parser(
        "validate",
        help="validate a JSON-lines file of events, printing a reason code per bad line",
        description=(
            "Validate one event per line (blank lines skipped). Each invalid line prints "
            "'LINE<TAB>REASON<TAB>FIELD<TAB>DETAIL'; the exit code is 1 if any line is invalid."
        ),
    )
    validate.add_argument("file", help="JSON-lines file, or - for standard input")
    validate.add_argument(
        "--origin",
        choices=[origin.value for origin in Origin],
        default=Origin.client.value,
        help="client: as sent to the collector (default); collected: as on telemetry.events",
    )
    validate.set_defaults(func=_validate)


def _export(args: argparse.Namespace) -> int:
    if args.check:
        if is_stale(args.out):
            print(f"{args.out} is stale: run `rtrl schema export`", file=sys.stderr)
            return 1
        print(f"{args.out} is current")
        return 0
    write_schema(args.out)
    print(f"wrote {args.out}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    origin = Origin(args.origin)
    if args.file == "-":
        return report_lines(sys.stdin.buffer, origin, sys.stdout)
    with open(args.file, "rb") as lines:
        return report_lines(lines, origin, sys.stdout)


def report_lines(lines: Iterable[bytes], origin: Origin, out: TextIO) -> int:
    """Validate each line, print one row per invalid one and a summary; 1 if any was invalid."""
    valid = invalid = 0
    for number, error in check_lines(lines, origin):
        if error is None:
            valid += 1
            continue
        invalid += 1
        print(f"{number}\t{error.reason}\t{error.field or '-'}\t{error.detail}", file=out)
    print(f"{valid} valid, {invalid} invalid", file=sys.stderr)
    return 1 if invalid else 0


def check_lines(
    lines: Iterable[bytes], origin: Origin
) -> Iterator[tuple[int, ContractError | None]]:
    """(line number, error or None) for each non-blank line."""
    for number, line in enumerate(lines, start=1):
        line = line.rstrip(b"\r\n")
        if not line.strip():
            continue
        try:
            parse_event(line, origin=origin)
        except ContractError as error:
            yield number, error
        else:
            yield number, None
