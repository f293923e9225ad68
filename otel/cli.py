"""`rtrl otel export`: every reward on `rewards` as a GenAI evaluation at the team's endpoint.

The options are the settings' fields (``otel.settings``, ``infra.settings_cli``). The handler
imports Kafka, HTTP and protobuf only when it runs, so ``rtrl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from infra.cli import add_bootstrap_arg, add_topic_prefix_arg, bootstrap_from
from infra.lifetime import sigterm_stops
from infra.settings_cli import Option, SettingsOptions, add_command, add_group
from otel.settings import ExportSettings, parse_headers

HEADERS_ENV = "OTEL_EXPORTER_OTLP_HEADERS"  # the OpenTelemetry SDKs' own variable

EXPORT_OPTIONS = SettingsOptions(
    ExportSettings,
    omit=("bootstrap", "topics"),
    options={
        "headers": Option(
            flags=("--header",),
            type=str,
            nargs="*",
            metavar="NAME=VALUE",
            default=None,
            help="HTTP headers sent with every request (an API key, a tenant), added to "
            f"${HEADERS_ENV}'s; values are never logged",
            to_field=parse_headers,
        ),
    },
)


def register(sub: argparse._SubParsersAction) -> None:
    osub = add_group(
        sub,
        "otel",
        help="export rewards to the team's OpenTelemetry endpoint",
        description="Rewards as GenAI gen_ai.evaluation.result events, beside the spans the "
        "team already sends (docs/contracts/otel-export-v1.md).",
    )
    e = add_command(
        osub,
        "export",
        _export,
        help="consume rewards and deliver each as an evaluation (OTLP logs, or Phoenix)",
        description="Delivers each batch until the endpoint accepted it (retrying with "
        "backoff while it is down), THEN commits its offsets: a crash delivers the batch "
        "again, never loses it. Privacy-mode records are never exported.",
    )
    add_bootstrap_arg(e)
    add_topic_prefix_arg(e)
    EXPORT_OPTIONS.add_to(e)


def _export(args: argparse.Namespace) -> int:
    from infra.topics import TopicNames

    try:
        given = EXPORT_OPTIONS.values(args)
        headers = parse_headers(os.environ.get(HEADERS_ENV))
        headers.update(given.pop("headers") or {})
        settings = ExportSettings(
            **given,
            headers=headers,
            bootstrap=bootstrap_from(args),
            topics=TopicNames(args.topic_prefix),
        )
    except ValueError as exc:
        print(f"rtrl otel export: {exc}", file=sys.stderr)
        return 2
    from otel.delivery import EndpointRefused
    from otel.exporter import Exporter

    try:
        stats = Exporter(settings).run(should_stop=sigterm_stops())
    except EndpointRefused as exc:
        print(f"rtrl otel export: {exc} (nothing of that batch was committed)", file=sys.stderr)
        return 1
    passed = ", ".join(f"{n} {reason}" for reason, n in sorted(stats.passed.items()))
    print(f"{stats.read} rewards read, {stats.delivered} delivered"
          + (f", passed: {passed}" if passed else ""))  # fmt: skip
    return 0
