"""The Kafka options every Kafka-facing command shares: ``--bootstrap`` and ``--topic-prefix``,
for hand-written parsers (``infra.cli``) and settings classes (``infra.settings_cli``) alike."""

from __future__ import annotations

import os

from infra.settings import resolve_bootstrap
from infra.settings_cli import Option

BOOTSTRAP_HELP = "Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS or 127.0.0.1:9092)"
TOPIC_PREFIX_HELP = "prefix of every topic name (isolates deployments sharing a cluster)"


def resolved_bootstrap(cli_value: str | None) -> str:
    """``--bootstrap``'s value, else the environment's, else the local broker."""
    return resolve_bootstrap(cli_value, os.environ)


# ``--bootstrap`` for a settings class's bootstrap field: None on the command line, the broker
# resolved when the settings are read.
BOOTSTRAP_OPTION = Option(default=None, help=BOOTSTRAP_HELP, to_field=resolved_bootstrap)
