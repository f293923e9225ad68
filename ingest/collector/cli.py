"""`rtrl collector` and `rtrl keys create|list|revoke`: run the HTTP collector, manage API keys.

Wire in with ``register_collector(sub)`` from ``ingest/cli.py``. The options are the fields of
``CollectorConfig`` and ``KeysOptions`` (``infra.settings_cli``). Only reading them reads the
environment (``--bootstrap``'s fallback, ``infra.kafka_options``); the collector itself
gets a CollectorConfig.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from infra.api_keys import CACHE_TTL_S, KEY_ID_CHARS, KeyStore, hash_key
from infra.kafka_options import BOOTSTRAP_OPTION, TOPIC_PREFIX_HELP
from infra.settings_cli import Option, SettingsOptions
from ingest.collector.config import CollectorConfig, KeysOptions

log = logging.getLogger(__name__)


def _as_written(text: str, flag: str | None = None) -> Option:
    """An option whose help never said its default, under its older flag (and dest) if any."""
    if flag is None:
        return Option(help=text, show_default=False)
    dest = flag.removeprefix("--").replace("-", "_")
    return Option(help=text, flags=(flag,), dest=dest, show_default=False)


# The producer's queue and Retry-After are no options; text options keep their written type.
COLLECTOR_OPTIONS = SettingsOptions(
    CollectorConfig,
    typed_text=False,
    omit=("producer_queue_max", "retry_after_s"),
    options={
        "port": Option(default=8080, help="TCP port"),
        "host": "bind address",
        "bootstrap": BOOTSTRAP_OPTION,
        "topic_prefix": TOPIC_PREFIX_HELP,
        "key_db": Option(
            flags=("--key-db",), old_flags=("--db",), help="SQLite file of hashed API keys"
        ),
        "max_body_bytes": _as_written("largest request body, before and after gunzip (413 beyond)"),
        "max_events_per_batch": _as_written("most events per request (413 beyond)", "--max-events"),
        "rate_per_key": _as_written("requests per second per API key (429 beyond)", "--rate"),
        "burst_per_key": _as_written("requests a key may send at once after being idle", "--burst"),
        "delivery_timeout_s": _as_written(
            "seconds Kafka may take to acknowledge a batch before answering 503",
            "--delivery-timeout",
        ),
        "workers": "processes serving the port (default 1); each has its own producer and its "
        "own per-key rate limit",
        "metrics_port": "serve Prometheus metrics on this port (/metrics), apart from the public "
        "one; worker i of --workers uses port+i; default: none",
    },
)
_KEY_DB = Option(flags=("--key-db",), old_flags=("--db",))
CREATE_OPTIONS = SettingsOptions(
    KeysOptions,
    typed_text=False,
    options={
        "org": Option(help="the tenant (org_id) the key belongs to", required=True),
        "key_db": _KEY_DB,
    },
)
LIST_OPTIONS = SettingsOptions(KeysOptions, typed_text=False, options={"key_db": _KEY_DB})
REVOKE_OPTIONS = SettingsOptions(KeysOptions, omit=("org",), options={"key_db": _KEY_DB})


def register_collector(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "collector",
        help="run the HTTP collector: POST /v1/events into telemetry.events",
        description="Receives event batches from emitters (Authorization: Bearer <key>), "
        "validates each event, writes valid ones to telemetry.events and invalid ones to "
        "telemetry.dlq, and answers 2xx only after Kafka acknowledged them. OpenAPI at "
        "/openapi.json, probes at /livez (alive) and /readyz (Kafka reachable), Prometheus "
        "metrics on --metrics-port.",
    )
    COLLECTOR_OPTIONS.add_to(c)
    c.set_defaults(func=_run_collector)

    k = sub.add_parser("keys", help="manage the collector's API keys (one tenant per key)")
    ksub = k.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = ksub.add_parser(
        "create",
        help="create a key for a tenant and print it (only once)",
        description="Prints a new API key for ORG. Only its sha256 is "
        "stored, so save the printed key now.",
    )
    CREATE_OPTIONS.add_to(create)
    create.set_defaults(func=_create_key)
    listing = ksub.add_parser(
        "list",
        help="list keys: id, tenant, created, revoked",
        description="Lists every key by its id (the first hex digits of "
        "its sha256, as `rtrl keys create` reports it), never the key "
        "itself.",
    )
    LIST_OPTIONS.add_to(listing)
    listing.set_defaults(func=_list_keys)
    revoke = ksub.add_parser(
        "revoke",
        help="revoke a key by its id",
        description="Revokes the key whose id starts with KEY_ID (from "
        "`rtrl keys list`). Running collectors refuse it (401) within "
        f"{CACHE_TTL_S:.0f} s.",
    )
    revoke.add_argument("key_id", metavar="KEY_ID", help="at least 8 hex digits of the key id")
    REVOKE_OPTIONS.add_to(revoke)
    revoke.set_defaults(func=_revoke_key)


def _run_collector(args: argparse.Namespace) -> int:
    from ingest.collector.server import run_workers

    try:
        config = COLLECTOR_OPTIONS.read(args)
    except ValueError as exc:
        print(f"rtrl collector: {exc}", file=sys.stderr)
        return 2
    from infra.settings import process_security

    log.info(
        "collector on http://%s:%d -> %s (%s, topics prefix %r), %d worker(s)",
        config.host,
        config.port,
        config.bootstrap,
        process_security().describe(),
        config.topic_prefix,
        config.workers,
    )
    return run_workers(config)


def _create_key(args: argparse.Namespace) -> int:
    options = CREATE_OPTIONS.read(args)
    store = KeyStore(options.key_db)
    try:
        key = store.create(options.org or "")  # required: never None
    except ValueError as exc:
        print(f"rtrl keys create: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(key)
    print(f"key id {hash_key(key)[:KEY_ID_CHARS]} for {options.org}", file=sys.stderr)
    return 0


def _list_keys(args: argparse.Namespace) -> int:
    options = LIST_OPTIONS.read(args)
    store = KeyStore(options.key_db)
    try:
        keys = [k for k in store.list() if options.org is None or k.org_id == options.org]
    finally:
        store.close()
    print(f"{'key id':<14}{'org':<24}{'created (UTC)':<22}state")
    for k in keys:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(k.created_at))
        print(f"{k.key_id:<14}{k.org_id:<24}{created:<22}{'revoked' if k.revoked else 'active'}")
    return 0


def _revoke_key(args: argparse.Namespace) -> int:
    store = KeyStore(REVOKE_OPTIONS.read(args).key_db)
    try:
        info = store.revoke_id(args.key_id)
    except (ValueError, LookupError) as exc:
        print(f"rtrl keys revoke: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"revoked {info.key_id} ({info.org_id})")
    return 0
