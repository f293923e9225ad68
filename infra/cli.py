"""`rtrl broker ...` and `rtrl topics ...`: the local Kafka cluster and the platform's topics
(their options: ``infra.cluster_options``), and the command-line helpers every command shares."""

from __future__ import annotations

import argparse
import os
import sys
import time

from infra import broker
from infra.broker_config import ClusterLayout
from infra.cluster_options import APPLY_OPTIONS, DATA_DIR_OPTIONS, LIST_OPTIONS, START_OPTIONS
from infra.kafka_dist import BrokerSetupError, default_cache_root
from infra.kafka_options import BOOTSTRAP_HELP, TOPIC_PREFIX_HELP, resolved_bootstrap
from infra.lifetime import sigterm_stops
from infra.settings_cli import Option, add_command, add_group
from infra.topics import TOPICS, PartitionChangeRefused, TopicNames


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
        said = []
        for e in exc.errors():  # a model's own check has no field: its message alone
            where, message = ".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, ")
            said.append(f"{where}: {message}" if where else message)
        return "; ".join(said)
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


def _watch_help(step: str) -> str:
    return (
        f"run as a service: {step} every --interval-s until SIGTERM (it stops "
        "between two, never in the middle of one)"
    )


def _interval_help(default_s: float) -> str:
    return f"with --watch: seconds between looks (default {default_s:g})"


def add_watch_args(p: argparse.ArgumentParser, step: str, default_s: float) -> None:
    """``--watch`` and ``--interval-s``: the command as a service (``infra.periodic``)."""
    p.add_argument("--watch", action="store_true", help=_watch_help(step))
    p.add_argument(
        "--interval-s", type=positive_seconds, default=default_s, help=_interval_help(default_s)
    )


def watch_options(step: str, default_s: float) -> dict[str, Option]:
    """``--watch`` and ``--interval-s`` for a settings class's fields ``watch`` (a bool) and
    ``interval_s`` (its default ``default_s``), as ``add_watch_args`` writes them."""
    return {
        "watch": Option(help=_watch_help(step)),
        "interval_s": Option(type=positive_seconds, help=_interval_help(default_s)),
    }


def add_bootstrap_arg(p: argparse.ArgumentParser) -> None:
    """The one way every Kafka-facing command takes its broker."""
    p.add_argument("--bootstrap", default=None, help=BOOTSTRAP_HELP)


def add_topic_prefix_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic-prefix", default="", help=TOPIC_PREFIX_HELP)


def bootstrap_from(args: argparse.Namespace) -> str:
    return resolved_bootstrap(getattr(args, "bootstrap", None))


def register(sub: argparse._SubParsersAction) -> None:
    bsub = add_group(
        sub,
        "broker",
        help="start, stop or inspect a local Apache Kafka (KRaft) cluster",
        description="A local Kafka 4 cluster from Maven Central's jars (needs Java 17 "
        "and Maven the first time). Nodes run in the background; logs are under "
        "the data dir.",
    )
    for action, helptext in (
        ("start", "format storage if new, start, wait until it answers"),
        ("stop", "shut down the cluster started with this data dir"),
        ("status", "say whether the cluster of this data dir is up"),
    ):
        options = START_OPTIONS if action == "start" else DATA_DIR_OPTIONS
        add_command(bsub, action, _broker, options, help=helptext)

    tsub = add_group(sub, "topics", help="declare the platform's topics on a cluster (idempotent)")
    add_command(
        tsub,
        "apply",
        _topics_apply,
        APPLY_OPTIONS,
        help="create missing topics, align configs, refuse partition changes",
    )
    add_command(tsub, "list", _topics_list, LIST_OPTIONS, help="print the declared topics")


def _layout(args: argparse.Namespace) -> ClusterLayout:
    """The cluster to start as its options say, or the one its data dir's state file names."""
    if args.broker_command == "start":
        return START_OPTIONS.read(args).layout()
    data_dir = DATA_DIR_OPTIONS.read(args).data_dir.resolve()
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
    options = START_OPTIONS.read(args)
    try:
        bootstrap = broker.start(
            layout,
            default_cache_root(os.environ),
            timeout=options.timeout,
            names=TopicNames(options.topic_prefix),
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
    if options.foreground:
        return _stay_attached(layout)
    return 0


def _stay_attached(layout: ClusterLayout) -> int:
    stopping = sigterm_stops()
    try:
        while not stopping() and len(broker.running_nodes(layout)) == layout.nodes:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    broker.stop(layout)
    return 0


def _topics_apply(args: argparse.Namespace) -> int:
    from infra.topics_apply import apply_topics

    options = APPLY_OPTIONS.read(args)
    try:
        actions = apply_topics(
            options.bootstrap, TopicNames(options.topic_prefix), options.replication
        )
    except PartitionChangeRefused as exc:
        print(f"rtrl topics apply: refused: {exc}", file=sys.stderr)
        return 1
    for a in actions:
        print(f"{a.action:14} {a.topic:32} {a.detail}")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    names = TopicNames(LIST_OPTIONS.read(args).topic_prefix)
    for spec in TOPICS:
        ret = "forever" if spec.retention_ms is None else f"{spec.retention_ms // 3_600_000} h"
        print(
            f"{names.name(spec.base):32} {spec.partitions:>3} partitions  {spec.cleanup:8} "
            f"{ret:>9}  {spec.purpose}"
        )
    return 0
