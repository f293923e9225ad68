"""`rtrl collector` and `rtrl keys create|list|revoke`: run the HTTP collector, manage API keys.

Wire in with ``register_collector(sub)`` from ``ingest/cli.py``. Only these handlers read the
environment (through ``infra.cli.bootstrap_from``); the collector itself gets a CollectorConfig.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from infra.cli import add_bootstrap_arg, add_topic_prefix_arg, bootstrap_from
from ingest.collector.config import DEFAULT_KEY_DB, CollectorConfig
from ingest.collector.keys import CACHE_TTL_S, KEY_ID_CHARS, KeyStore, hash_key

log = logging.getLogger(__name__)
_DEFAULTS = CollectorConfig(port=8080)


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
    c.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    c.add_argument(
        "--host", default=_DEFAULTS.host, help=f"bind address (default {_DEFAULTS.host})"
    )
    add_bootstrap_arg(c)
    add_topic_prefix_arg(c)
    _add_key_db_arg(c)
    c.add_argument(
        "--max-body-bytes",
        type=int,
        default=_DEFAULTS.max_body_bytes,
        help="largest request body, before and after gunzip (413 beyond)",
    )
    c.add_argument(
        "--max-events",
        type=int,
        default=_DEFAULTS.max_events_per_batch,
        help="most events per request (413 beyond)",
    )
    c.add_argument(
        "--rate",
        type=float,
        default=_DEFAULTS.rate_per_key,
        help="requests per second per API key (429 beyond)",
    )
    c.add_argument(
        "--burst",
        type=int,
        default=_DEFAULTS.burst_per_key,
        help="requests a key may send at once after being idle",
    )
    c.add_argument(
        "--delivery-timeout",
        type=float,
        default=_DEFAULTS.delivery_timeout_s,
        help="seconds Kafka may take to acknowledge a batch before answering 503",
    )
    c.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes serving the port (default 1); each has its own producer "
        "and its own per-key rate limit",
    )
    c.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on this port (/metrics), apart from the "
        "public one; worker i of --workers uses port+i; default: none",
    )
    c.set_defaults(func=_run_collector)

    k = sub.add_parser("keys", help="manage the collector's API keys (one tenant per key)")
    ksub = k.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = ksub.add_parser(
        "create",
        help="create a key for a tenant and print it (only once)",
        description="Prints a new API key for ORG. Only its sha256 is "
        "stored, so save the printed key now.",
    )
    create.add_argument("--org", required=True, help="the tenant (org_id) the key belongs to")
    _add_key_db_arg(create)
    create.set_defaults(func=_create_key)
    listing = ksub.add_parser(
        "list",
        help="list keys: id, tenant, created, revoked",
        description="Lists every key by its id (the first hex digits of "
        "its sha256, as `rtrl keys create` reports it), never the key "
        "itself.",
    )
    listing.add_argument("--org", default=None, help="only this tenant's keys")
    _add_key_db_arg(listing)
    listing.set_defaults(func=_list_keys)
    revoke = ksub.add_parser(
        "revoke",
        help="revoke a key by its id",
        description="Revokes the key whose id starts with KEY_ID (from "
        "`rtrl keys list`). Running collectors refuse it (401) within "
        f"{CACHE_TTL_S:.0f} s.",
    )
    revoke.add_argument("key_id", metavar="KEY_ID", help="at least 8 hex digits of the key id")
    _add_key_db_arg(revoke)
    revoke.set_defaults(func=_revoke_key)


def _add_key_db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        "--key-db",
        dest="key_db",
        type=Path,
        default=DEFAULT_KEY_DB,
        help=f"SQLite file of hashed API keys (default {DEFAULT_KEY_DB})",
    )


def _run_collector(args: argparse.Namespace) -> int:
    from ingest.collector.server import run_workers

    try:
        config = CollectorConfig(
            port=args.port,
            host=args.host,
            bootstrap=bootstrap_from(args),
            topic_prefix=args.topic_prefix,
            key_db=args.key_db,
            max_body_bytes=args.max_body_bytes,
            max_events_per_batch=args.max_events,
            rate_per_key=args.rate,
            burst_per_key=args.burst,
            delivery_timeout_s=args.delivery_timeout,
            workers=args.workers,
            metrics_port=args.metrics_port,
        )
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
    store = KeyStore(args.key_db)
    try:
        key = store.create(args.org)
    except ValueError as exc:
        print(f"rtrl keys create: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(key)
    print(f"key id {hash_key(key)[:KEY_ID_CHARS]} for {args.org}", file=sys.stderr)
    return 0


def _list_keys(args: argparse.Namespace) -> int:
    store = KeyStore(args.key_db)
    try:
        keys = [k for k in store.list() if args.org is None or k.org_id == args.org]
    finally:
        store.close()
    print(f"{'key id':<14}{'org':<24}{'created (UTC)':<22}state")
    for k in keys:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(k.created_at))
        print(f"{k.key_id:<14}{k.org_id:<24}{created:<22}{'revoked' if k.revoked else 'active'}")
    return 0


def _revoke_key(args: argparse.Namespace) -> int:
    store = KeyStore(args.key_db)
    try:
        info = store.revoke_id(args.key_id)
    except (ValueError, LookupError) as exc:
        print(f"rtrl keys revoke: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"revoked {info.key_id} ({info.org_id})")
    return 0
