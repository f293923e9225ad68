"""Subcommands of the warehouse stage: `rtrl warehouse ...`, `rtrl batches ...`, `rtrl report ab`,
`rtrl forget`.

Every command's options are the fields of a settings class (``infra.settings_cli``): the sink's
and the batch builder's their services' settings (``warehouse.settings``), the others'
``warehouse.cli_options``. Handlers import their modules when they run, so ``rtrl --help`` stays
fast (the quality gate loads Great Expectations, which takes seconds).
"""

from __future__ import annotations

import argparse
import sys

from infra.cli import add_bootstrap_arg, add_topic_prefix_arg, add_watch_args, bootstrap_from
from infra.lifetime import sigterm_stops
from infra.old_flags import add_old_flags
from infra.settings_cli import SettingsOptions, add_command, add_group
from warehouse.cli_options import (
    AB_REPORT_OPTIONS,
    BATCH_LIST_OPTIONS,
    CATALOG_FLAG,
    CATALOG_OPTIONS,
    COMPACT_OPTIONS,
    DB_HELP,
    FORGET_OPTIONS,
    OLD_CATALOG_FLAGS,
    OLD_WAREHOUSE_FLAGS,
    ROOT_HELP,
    WAREHOUSE_FLAG,
    CompactOptions,
)
from warehouse.open_store import open_store as _store
from warehouse.settings import BuildConfig, SinkConfig

# Given by the command: Kafka's options and the root (--bootstrap, --topic-prefix,
# --warehouse); the sink's pacing and timeouts are no options.
SINK_OPTIONS = SettingsOptions(
    SinkConfig,
    omit=("bootstrap", "root", "topics", "once_idle_s", "compact_every_s", "session_timeout_ms"),
)
BUILD_OPTIONS = SettingsOptions(BuildConfig, omit=("quality",))


def _add_root(p: argparse.ArgumentParser, db: bool = True) -> None:
    """The sink's and the batch builder's --warehouse (and --catalog), read as ``args.root``
    and ``args.db``: their settings take none."""
    p.add_argument(WAREHOUSE_FLAG, dest="root", default=None, help=ROOT_HELP)
    add_old_flags(p, OLD_WAREHOUSE_FLAGS, WAREHOUSE_FLAG, dest="root")
    if db:
        p.add_argument(CATALOG_FLAG, dest="db", default=None, help=DB_HELP)
        add_old_flags(p, OLD_CATALOG_FLAGS, CATALOG_FLAG, dest="db")


def register(sub: argparse._SubParsersAction) -> None:
    _register_warehouse(sub)
    _register_batches(sub)
    rsub = add_group(sub, "report", help="reports on the warehouse", metavar="REPORT")
    add_command(
        rsub,
        "ab",
        _report_ab,
        AB_REPORT_OPTIONS,
        help="A/B experiment: per-arm metrics, relative change, 95%% CI, p-value, SRM check",
        description="Kept edits, dissatisfied follow-ups, latency (mean, p50) "
        "and mean reward per arm; each treatment against the control arm, with its 95% CI, "
        "two-sided p-value and that p-value adjusted by Holm across every arm and metric of the "
        "report (compare it with 0.05 for a 5 % chance of any false alarm); and the "
        "sample-ratio-mismatch check of the users per arm (chi-square, alarm at p < 0.001). "
        "With --sequential, anytime-valid intervals and p-values instead, for a mart refreshed "
        "and read repeatedly. The numbers are those of the ab_report and ab_srm marts.",
    )
    add_command(
        sub,
        "forget",
        _forget,
        FORGET_OPTIONS,
        help="remove an organisation's user's rows from every table and file",
        description="Sends a tombstone for each of the user's interactions to the "
        "compacted rewards topic, rewrites every warehouse file holding the user, "
        "records them so the sink and batch builder drop their future rows, and "
        "rebuilds the catalog. If Kafka fails nothing is rewritten: run it again.",
    )


def _register_warehouse(sub: argparse._SubParsersAction) -> None:
    wsub = add_group(sub, "warehouse",
                     help="land Kafka topics in Parquet and build the DuckDB catalog",
                     description="The sink writes rewards, the raw event archive, rollouts, "
                     "late events, the DLQ and checkpoint announcements as hive-partitioned "
                     "Parquet; the catalog puts staging views and marts on "
                     "them for reports, batches and dashboards.")  # fmt: skip
    s = add_command(
        wsub,
        "sink",
        _sink,
        help="consume rewards, telemetry.events, rollouts, telemetry.late, telemetry.dlq and "
        "checkpoints into Parquet",
        description="Writes each flush durably (temporary name, fsync, rename), "
        "THEN commits the offsets; a restart rewrites what was not committed.",
    )
    add_bootstrap_arg(s)
    add_topic_prefix_arg(s)
    _add_root(s, db=False)
    SINK_OPTIONS.add_to(s)
    add_command(
        wsub,
        "catalog",
        _catalog,
        CATALOG_OPTIONS,
        help="(re)build the DuckDB views and marts, check invariants",
        description="Prints the read-only SQLAlchemy URL for dashboards.",
    )
    add_command(
        wsub,
        "compact",
        _compact,
        COMPACT_OPTIONS,
        help="merge small committed Parquet files",
        description="Merges only files whose offsets the sink's group committed "
        "(asks Kafka), unless --all says no sink is running.",
    )


def _register_batches(sub: argparse._SubParsersAction) -> None:
    bsub = add_group(sub, "batches", help="build and list training batches (quality-gated)")
    bb = add_command(
        bsub,
        "build",
        _batches_build,
        help="validate new rewards per checkpoint; offer or quarantine",
        description="Runs the Great Expectations suite on each candidate batch. "
        "A passing batch is written, added to the manifest and announced on the "
        "batches topic; a failing one is quarantined with its report.",
    )
    add_bootstrap_arg(bb)
    add_topic_prefix_arg(bb)
    _add_root(bb)
    bb.add_argument("--no-publish", action="store_true", help="do not announce on Kafka")
    BUILD_OPTIONS.add_to(bb)
    add_watch_args(bb, "rebuild the catalog, then build and announce what is due", 60.0)
    bb.add_argument("--metrics-port", type=int, default=None,
                    help="with --watch: Prometheus metrics on this port (/metrics): passes "
                    "by outcome, the last pass's time and batches "
                    "(infra/watch_metrics.py)")  # fmt: skip
    add_command(bsub, "list", _batches_list, BATCH_LIST_OPTIONS, help="show the manifest")


def _sink(args: argparse.Namespace) -> int:
    from infra.topics import TopicNames
    from warehouse.sink import Sink

    store = _store(args.root, must_exist=False)
    try:
        config = SINK_OPTIONS.read(
            args,
            bootstrap=bootstrap_from(args),
            root=store.root,
            topics=TopicNames(args.topic_prefix),
        )
    except ValueError as exc:
        print(f"rtrl warehouse sink: {exc}", file=sys.stderr)
        return 2
    from infra.kafka_errors import KafkaRefused

    try:
        stats = Sink(config, store).run(should_stop=sigterm_stops())
    except KafkaRefused as exc:
        print(f"rtrl warehouse sink: {exc}", file=sys.stderr)
        return 1
    print(f"{stats.messages} messages, {stats.files} files, {stats.flushes} flushes")
    return 0


def _catalog(args: argparse.Namespace) -> int:
    from warehouse.catalog import build_catalog, check_models, connect, sqlalchemy_url

    options = CATALOG_OPTIONS.read(args)
    store = _store(options.root)
    db = build_catalog(store, options.db)
    con = connect(store, db, read_only=True)
    try:
        problems = list(check_models(con))
    finally:
        con.close()
    for p in problems:
        print(f"invariant broken: {p}", file=sys.stderr)
    print(sqlalchemy_url(db))
    return 1 if problems else 0


def _compact(args: argparse.Namespace) -> int:
    from warehouse.compact import compact

    options = COMPACT_OPTIONS.read(args)
    store = _store(options.root)
    safe = None if options.all else _committed_offsets(options)
    print(f"removed {compact(store, safe)} files")
    return 0


def _committed_offsets(options: CompactOptions) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, TopicPartition

    from infra.settings import manual_commit_consumer
    from infra.topics import TopicNames

    config = SinkConfig(
        bootstrap=options.bootstrap,
        root=".",
        topics=TopicNames(options.topic_prefix),
        group_id=options.group_id,
    )
    consumer = Consumer(manual_commit_consumer(config.bootstrap, config.group_id))
    try:
        wanted = []
        for topic in config.datasets():
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            wanted += [TopicPartition(topic, p) for p in meta.partitions]
        got = consumer.committed(wanted, timeout=30)
    finally:
        consumer.close()
    return {(config.datasets()[tp.topic], tp.partition): tp.offset for tp in got if tp.offset >= 0}


def _batches_build(args: argparse.Namespace) -> int:
    import logging
    import threading

    import duckdb
    from confluent_kafka import KafkaException

    from infra.lifetime import stop_signals_call
    from infra.periodic import run_every
    from infra.topics import TopicNames
    from infra.watch_metrics import WatchMetrics
    from warehouse.batches import announce_missing, build_batches

    store = _store(args.root, must_exist=not args.watch)
    config = BUILD_OPTIONS.read(args)
    log = logging.getLogger("rtrl.batches")

    made: dict[str, float] = {}

    def build() -> bool:
        entries = build_batches(store, config, db=args.db)
        made.update(offered=sum(e.offered for e in entries),
                    quarantined=sum(not e.offered for e in entries))  # fmt: skip
        for e in entries:
            print(
                f"{e.batch_id}  {e.quality:6}  {'offered' if e.offered else 'quarantined'}  "
                f"{e.n_rows} rows",
                flush=True,
            )
        if not args.no_publish:  # this build's offered batches, and any a failure left unsaid
            announce_missing(bootstrap_from(args), TopicNames(args.topic_prefix).batches, store)
        if args.watch:
            offered = sum(e.offered for e in entries)
            log.info("built %d batch(es): %d offered, %d quarantined", len(entries), offered,
                     len(entries) - offered)  # fmt: skip
        return False  # a build takes what is due: the next one waits for the interval

    if not args.watch:
        build()
        return 0
    stop = threading.Event()
    log.info("building the batches due in %s every %.0f s (interactions closed %d s ago or "
             "more, at least %d rows a batch)", store.root, args.interval_s, config.settle_s,
             config.min_rows)  # fmt: skip
    metrics = WatchMetrics("batches")
    server = metrics.serve(args.metrics_port) if args.metrics_port is not None else None

    def on_pass(outcome: str, seconds: float) -> None:  # a build that made batches worked
        worked = outcome == "idle" and any(made.values())
        metrics.passed("worked" if worked else outcome, seconds, made)
        made.clear()

    try:
        with stop_signals_call(lambda _signum, _frame: stop.set()):
            retry_on = (KafkaException, RuntimeError, OSError, duckdb.Error)
            run_every(build, args.interval_s, stop, retry_on, log, on_pass)
    finally:
        if server is not None:
            server.shutdown()
    return 0


def _batches_list(args: argparse.Namespace) -> int:
    from warehouse.batches import list_batches

    options = BATCH_LIST_OPTIONS.read(args)
    rows = list_batches(_store(options.root), offered_only=options.offered)
    print(
        f"{'batch_id':50} {'checkpoint':14} {'reward_version':14} {'rows':>7} {'quality':7} "
        f"{'offered':7} created_at"
    )
    for e in rows:
        print(
            f"{e.batch_id:50} {e.checkpoint_id:14} {e.reward_version:14} {e.n_rows:>7} "
            f"{e.quality:7} {str(e.offered):7} {e.created_at:%Y-%m-%dT%H:%M:%SZ}"
        )
    return 0


def _report_ab(args: argparse.Namespace) -> int:
    from warehouse.report import ab_report, ab_srm, parse_weights, render

    options = AB_REPORT_OPTIONS.read(args)
    store = _store(options.root)
    try:
        weights = None if options.weights is None else parse_weights(options.weights)
        report = ab_report(store, options.experiment, control=options.control, db=options.db,
                           org=options.org)  # fmt: skip
        srm = ab_srm(store, options.experiment, weights, db=options.db)
    except (LookupError, ValueError) as exc:
        print(f"rtrl report ab: {exc}", file=sys.stderr)
        return 1
    print(render(report, options.format, srm, sequential=options.sequential), end="")
    if options.plot is not None and report:
        from warehouse.report_plot import plot_ab

        print(f"plot: {plot_ab(report, options.plot)}", file=sys.stderr)
    return 0


def _forget(args: argparse.Namespace) -> int:
    from warehouse.forget_cli import run_forget

    return run_forget(FORGET_OPTIONS.read(args))
