"""Subcommands of the ingest stage: the event contract's `rtrl schema`, and the collector's
`rtrl collector` and `rtrl keys`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from infra.settings_cli import Option, SettingsOptions, add_command, add_group
from ingest.contract import ContractError, Origin, parse_event
from ingest.contract.schema import SCHEMA_PATH, is_stale, write_schema


@dataclass(frozen=True)
class SchemaExportOptions:
    """Where `rtrl schema export` writes the event's JSON Schema, or checks that it is current."""

    out: Path = field(
        default=SCHEMA_PATH, metadata={"help": f"where to write (default: {SCHEMA_PATH})"}
    )
    check: bool = field(
        default=False, metadata={"help": "write nothing; exit 1 if the file is stale"}
    )


@dataclass(frozen=True)
class SchemaValidateOptions:
    """The events `rtrl schema validate` checks, and as which origin's."""

    file: str = field(metadata={"help": "JSON-lines file, or - for standard input"})
    origin: str = field(
        default=Origin.client.value,
        metadata={
            "help": "client: as sent to the collector (default); collected: as on telemetry.events"
        },
    )


SCHEMA_EXPORT_OPTIONS = SettingsOptions(SchemaExportOptions)
# Written by hand before their fields: the file by its place, the text kept as typed.
SCHEMA_VALIDATE_OPTIONS = SettingsOptions(
    SchemaValidateOptions,
    typed_text=False,
    options={
        "file": Option(positional=True),
        "origin": Option(choices=[origin.value for origin in Origin]),
    },
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `schema` (export, validate), `collector` and `keys`."""
    from ingest.collector.cli import register_collector

    register_collector(sub)
    actions = add_group(
        sub,
        "schema",
        help="export the event JSON Schema or validate events against the contract",
        description="The telemetry event contract (version 1) as JSON Schema, and a validator.",
    )
    add_command(
        actions,
        "export",
        _export,
        SCHEMA_EXPORT_OPTIONS,
        help="write the JSON Schema of an event",
        description="Render the JSON Schema from the code and write it, or check it is current.",
    )
    add_command(
        actions,
        "validate",
        _validate,
        SCHEMA_VALIDATE_OPTIONS,
        help="validate a JSON-lines file of events, printing a reason code per bad line",
        description=(
            "Validate one event per line (blank lines skipped). Each invalid line prints "
            "'LINE<TAB>REASON<TAB>FIELD<TAB>DETAIL'; the exit code is 1 if any line is invalid."
        ),
    )


def _export(args: argparse.Namespace) -> int:
    options = SCHEMA_EXPORT_OPTIONS.read(args)
    if options.check:
        if is_stale(options.out):
            print(f"{options.out} is stale: run `rtrl schema export`", file=sys.stderr)
            return 1
        print(f"{options.out} is current")
        return 0
    write_schema(options.out)
    print(f"wrote {options.out}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    options = SCHEMA_VALIDATE_OPTIONS.read(args)
    origin = Origin(options.origin)
    if options.file == "-":
        return report_lines(sys.stdin.buffer, origin, sys.stdout)
    with open(options.file, "rb") as lines:
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
