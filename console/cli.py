"""`rtrl console`: serve the live page of a running loop.

Building the parser imports only the settings; the server (FastAPI, DuckDB, the registry) is
imported when the command runs.
"""

from __future__ import annotations

import argparse
import logging

from console.settings import ConsoleSettings
from infra.settings_cli import Option, SettingsOptions, add_command

log = logging.getLogger("rtrl.console")

OPTIONS = SettingsOptions(
    ConsoleSettings,
    options={
        # the catalog file, named as in every command; --warehouse named it here before
        "warehouse": Option(flags=("--catalog",), old_flags=("--warehouse",)),
        "metrics": Option(
            flags=("--metrics",),
            type=str,
            nargs="*",
            metavar="URL",
            to_field=tuple,
            from_field=list,
        ),  # fmt: skip
    },
)


def register(sub: argparse._SubParsersAction) -> None:
    add_command(
        sub,
        "console",
        _serve,
        OPTIONS,
        help="the live page of a running loop: serving, gate and canary decisions, rewards, "
        "ingest and stream health",
        description="Serve a page that shows, and updates without a reload (server-sent "
        "events): what serves now (checkpoints, experiment arms and their shares), every "
        "candidate with its gate decision and reasons (with a link that re-runs it from its "
        "evidence), each canary's course look by look with its bound and margin, reward by "
        "checkpoint over time with 95 % intervals, the running experiment's headline metrics, "
        "ingest and dead-letter rates by reason, stream lag, the mismatch KL per batch and the "
        "reward-hacking monitors. Reads the warehouse catalog and the registry read-only and "
        "the services' Prometheus metrics. Example: rtrl console --data-dir .rtrl/run "
        "--metrics http://127.0.0.1:9101/metrics",
    )


def _serve(args: argparse.Namespace) -> int:
    from console.app import create_app
    from infra.http_server import http_server

    settings = OPTIONS.read(args)
    server = http_server(create_app(settings), settings.host, settings.port)
    log.info("console on http://%s:%d/ (registry %s, catalog %s, %d metrics endpoint(s))",
             settings.host, settings.port, settings.registry_dir(), settings.catalog(),
             len(settings.metrics))  # fmt: skip
    server.run()
    return 0
