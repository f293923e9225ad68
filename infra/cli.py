"""`rtrl broker ...` and `rtrl topics ...`: the local Kafka cluster and the platform's topics."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from infra import broker
from infra.broker_config import ClusterLayout
from infra.kafka_dist import BrokerSetupError, default_cache_root
from infra.settings import resolve_bootstrap
from infra.settings_cli import Option
from infra.topics import TOPICS, PartitionChangeRefused, TopicNames

DEFAULT_DATA_DIR = Path(".rtrl/kafka")


def explain(exc: BaseException) -> str:
    """A user's mistake in one sentence: each field a validation refused, or the error's text.

    >>> from pydantic import BaseModel, Field
    >>> class Settings(BaseModel):
    ...     port: int = Field(ge=0)
    >>> try:
    ...     Settings(port=-1)
    ... except Exception as exc:
    ...     print(explain(exc))
    port: Input should be greater than or equal to 0
    """
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return str(exc)


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1.

    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be at least 1, got 0
    """
    value = int(text)  # argparse reports a ValueError as "invalid positive_int value"
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a number of seconds above 0.

    >>> positive_seconds("0.5")
    0.5
    >>> positive_seconds("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be above 0 seconds, got 0.0
    """
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {value}")
    return value


def add_watch_args(p: argparse.ArgumentParser, step: str, default_s: float) -> None:
    """``--watch`` and ``--interval-s``: the command as a service (``infra.periodic``)."""
    p.add_argument(
        "--watch",
        action="store_true",
        help=f"run as a service: {step} every --interval-s until SIGTERM (it stops "
        "between two, never in the middle of one)",
    )
    p.add_argument(
        "--interval-s",
        type=positive_seconds,
        default=default_s,
        help=f"with --watch: seconds between looks (default {default_s:g})",
    )


BOOTSTRAP_HELP = "Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS or 127.0.0.1:9092)"
TOPIC_PREFIX_HELP = "prefix of every topic name (isolates deployments sharing a cluster)"


def resolved_bootstrap(cli_value: str | None) -> str:
    """``--bootstrap``'s value, else the environment's, else the local broker."""
    return resolve_bootstrap(cli_value, os.environ)


# ``--bootstrap`` for a settings class's bootstrap field (``infra.settings_cli``): None on the
# command line, the broker resolved when the settings are read.
BOOTSTRAP_OPTION = Option(default=None, help=BOOTSTRAP_HELP, to_field=resolved_bootstrap)


def add_bootstrap_arg(p: argparse.ArgumentParser) -> None:
    """The one way every Kafka-facing command takes its broker."""
    p.add_argument("--bootstrap", default=None, help=BOOTSTRAP_HELP)


def add_topic_prefix_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic-prefix", default="", help=TOPIC_PREFIX_HELP)


def bootstrap_from(args: argparse.Namespace) -> str:
    return resolved_bootstrap(getattr(args, "bootstrap", None))


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser(
        "broker",
        help="start, stop or inspect a local Apache Kafka (KRaft) cluster",
        description="A local Kafka 4 cluster from Maven Central's jars (needs Java 17 "
        "and Maven the first time). Nodes run in the background; logs are under "
        "the data dir.",
    )
    bsub = b.add_subparsers(dest="broker_command", metavar="ACTION", required=True)
    for action, helptext in (
        ("start", "format storage if new, start, wait until it answers"),
        ("stop", "shut down the cluster started with this data dir"),
        ("status", "say whether the cluster of this data dir is up"),
    ):
        p = bsub.add_parser(action, help=helptext)
        p.add_argument(
            "--data-dir",
            type=Path,
            default=DEFAULT_DATA_DIR,
            help=f"where the cluster keeps its logs and state (default {DEFAULT_DATA_DIR})",
        )
        if action == "start":
            p.add_argument(
                "--port",
                type=int,
                default=9092,
                help="client port of node 0; node i uses port+i, controllers after",
            )
            p.add_argument("--nodes", type=int, default=1, help="1 (default) or 3 for replication")
            p.add_argument(
                "--foreground", action="store_true", help="stay attached; Ctrl-C stops the cluster"
            )
            p.add_argument(
                "--timeout", type=float, default=90.0, help="seconds to wait for start-up"
            )
            p.add_argument(
                "--secure",
                action="store_true",
                help="SASL_SSL only (SCRAM-SHA-512 over mutual TLS) with ACLs: a generated CA, "
                "a user per service and its settings file under DATA_DIR/secure",
            )
            add_topic_prefix_arg(p)
        p.set_defaults(func=_broker)

    t = sub.add_parser("topics", help="declare the platform's topics on a cluster (idempotent)")
    tsub = t.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    ap = tsub.add_parser(
        "apply", help="create missing topics, align configs, refuse partition changes"
    )
    add_bootstrap_arg(ap)
    add_topic_prefix_arg(ap)
    ap.add_argument(
        "--replication",
        type=int,
        default=None,
        help="replication factor for new topics (default: min(3, brokers))",
    )
    ap.set_defaults(func=_topics_apply)
    lp = tsub.add_parser("list", help="print the declared topics")
    add_topic_prefix_arg(lp)
    lp.set_defaults(func=_topics_list)


def _layout(args: argparse.Namespace) -> ClusterLayout:
    data_dir = args.data_dir.resolve()
    if args.broker_command == "start":
        return ClusterLayout(data_dir, port=args.port, nodes=args.nodes, secure=args.secure)
    state = broker.read_state(ClusterLayout(data_dir)) or {}
    return ClusterLayout(
        data_dir,
        port=state.get("port", 9092),
        nodes=state.get("nodes", 1),
        secure=state.get("secure", False),
    )


def _broker(args: argparse.Namespace) -> int:
    try:
        layout = _layout(args)
    except ValueError as exc:
        print(f"rtrl broker: {exc}", file=sys.stderr)
        return 2
    if args.broker_command == "stop":
        n = broker.stop(layout)
        print(
            f"stopped {n} node(s) of {layout.data_dir}"
            if n
            else f"nothing running in {layout.data_dir}"
        )
        return 0
    if args.broker_command == "status":
        alive = broker.running_nodes(layout)
        up = len(alive) == layout.nodes and alive
        print(
            f"{'up' if up else 'down'}: {len(alive)}/{layout.nodes} node(s) at {layout.bootstrap}"
            f" ({layout.data_dir})"
        )
        return 0 if up else 1
    try:
        bootstrap = broker.start(
            layout,
            default_cache_root(os.environ),
            timeout=args.timeout,
            names=TopicNames(args.topic_prefix),
        )
    except BrokerSetupError as exc:
        print(f"rtrl broker start: {exc}", file=sys.stderr)
        return 1
    print(bootstrap, flush=True)
    if layout.secure:
        print(
            f"SASL_SSL only; run each service with RTRL_KAFKA_CONFIG="
            f"{layout.secure_dir}/<service>.toml (collector, stream, sink, batches, trainer, "
            f"serving; admin.toml for `rtrl topics apply`)",
            file=sys.stderr,
            flush=True,
        )
    if args.foreground:
        return _stay_attached(layout)
    return 0


def _stay_attached(layout: ClusterLayout) -> int:
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    try:
        while not stopping and len(broker.running_nodes(layout)) == layout.nodes:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    broker.stop(layout)
    return 0


def _topics_apply(args: argparse.Namespace) -> int:
    from infra.topics_apply import apply_topics

    try:
        actions = apply_topics(
            bootstrap_from(args), TopicNames(args.topic_prefix), args.replication
        )
    except PartitionChangeRefused as exc:
        print(f"rtrl topics apply: refused: {exc}", file=sys.stderr)
        return 1
    for a in actions:
        print(f"{a.action:14} {a.topic:32} {a.detail}")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    names = TopicNames(args.topic_prefix)
    for spec in TOPICS:
        ret = "forever" if spec.retention_ms is None else f"{spec.retention_ms // 3_600_000} h"
        print(
            f"{names.name(spec.base):32} {spec.partitions:>3} partitions  {spec.cleanup:8} "
            f"{ret:>9}  {spec.purpose}"
        )
    return 0
