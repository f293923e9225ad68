"""`rtrl stream worker`: the Faust worker that joins events into reward records."""

from __future__ import annotations

import argparse
from pathlib import Path

from infra.cli import add_bootstrap_arg, add_topic_prefix_arg, bootstrap_from, explain
from infra.settings import admin


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "stream",
        help="the stream join: telemetry.events -> rewards",
        description="Join each interaction's events into reward records (reward "
        "spec v1) as they arrive, with corrections as new revisions.",
    )
    ssub = s.add_subparsers(dest="stream_command", metavar="ACTION", required=True)
    w = ssub.add_parser(
        "worker",
        help="run a worker (several share the partitions of a group)",
        description="Consume telemetry.events, keep per-interaction state in a "
        "changelogged table, publish records to rewards, late events to "
        "telemetry.late, invalid messages to telemetry.dlq. At-least-once; a "
        "record's (interaction_id, revision) always names the same content. "
        "The worker runs as a child process that is restarted when it exits "
        "on its own (exit 75: the consumer skipped messages; 70: a chunk "
        "failed), unless --no-supervisor.",
    )
    add_worker_args(w)
    w.set_defaults(func=_worker)


def add_worker_args(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arg(p)
    add_topic_prefix_arg(p)
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".rtrl/stream"),
        help="local state (RocksDB tables) of this worker (default .rtrl/stream)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="reward configuration (.toml/.json/.yaml); default: spec v1's numbers",
    )
    p.add_argument(
        "--group-id",
        default=None,
        help="consumer group and changelog prefix (default rtrl-stream-<prefix>)",
    )
    p.add_argument(
        "--store",
        choices=("rocksdb", "memory"),
        default="rocksdb",
        help="where the table lives: rocksdb (bounded memory, default) or memory",
    )
    p.add_argument(
        "--rocksdb-mib",
        type=int,
        default=64,
        help="RocksDB memory per partition's state database, MiB: write buffers "
        "and block cache (default 64)",
    )
    p.add_argument(
        "--deadlines-in-memory",
        type=int,
        default=200_000,
        help="open interactions' deadlines kept in memory per partition (~180 bytes "
        "each); beyond, the partition's store is rescanned when needed (default "
        "200000)",
    )
    p.add_argument(
        "--chunk-size",
        type=int,
        default=10_000,
        help="most events per fetched batch, made durable together (default 10000)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on this port (/metrics); default: none",
    )
    p.add_argument(
        "--progress-s", type=float, default=10.0, help="seconds between progress lines (default 10)"
    )
    p.add_argument(
        "--no-supervisor",
        action="store_true",
        help="run the worker in this process and exit with its code (for a process "
        "manager that restarts it: restart on 75 at once, on 70 after a pause)",
    )
    p.add_argument("--child-of", type=int, default=None, help=argparse.SUPPRESS)


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The worker's own options, to start it again as a child process."""
    argv = [
        "--bootstrap",
        bootstrap_from(args),
        "--topic-prefix",
        args.topic_prefix,
        "--data-dir",
        str(args.data_dir),
        "--store",
        args.store,
        "--rocksdb-mib",
        str(args.rocksdb_mib),
        "--deadlines-in-memory",
        str(args.deadlines_in_memory),
        "--chunk-size",
        str(args.chunk_size),
        "--progress-s",
        str(args.progress_s),
    ]
    if args.config:
        argv += ["--config", str(args.config)]
    if args.group_id:
        argv += ["--group-id", args.group_id]
    if args.metrics_port is not None:
        argv += ["--metrics-port", str(args.metrics_port)]
    return argv


def settings_from(args: argparse.Namespace, *, ask_broker: bool = True):
    """The worker's settings; ``ask_broker=False`` checks the command line's values alone (the
    partition count and replication the broker would give are placeholders then)."""
    from infra.topics import TopicNames
    from rewards.config import RewardConfig, load_config
    from streams.settings import WorkerSettings

    bootstrap = bootstrap_from(args)
    group = args.group_id or f"rtrl-stream-{args.topic_prefix}".rstrip("-.")
    topic = TopicNames(args.topic_prefix).events
    return WorkerSettings(
        bootstrap=bootstrap,
        topic_prefix=args.topic_prefix,
        data_dir=args.data_dir,
        reward=load_config(args.config) if args.config else RewardConfig(),
        group_id=group,
        store=args.store,
        rocksdb_partition_mib=args.rocksdb_mib,
        deadlines_in_memory=args.deadlines_in_memory,
        partitions=_partitions(bootstrap, topic) if ask_broker else 1,
        changelog_replication=_replication(bootstrap) if ask_broker else 1,
        chunk_size=args.chunk_size,
        metrics_port=args.metrics_port,
        progress_s=args.progress_s,
    )


def invalid_options(args: argparse.Namespace) -> str | None:
    """What is wrong with the worker's options, said before anything starts; None if nothing."""
    try:
        settings_from(args, ask_broker=False)
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        return explain(exc)
    return None


def _partitions(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    from infra.kafka_errors import is_refusal, refusal_sentence
    from infra.settings import process_security

    md = AdminClient(admin(bootstrap)).list_topics(topic, timeout=30)
    found = md.topics.get(topic)
    if found is not None and found.error is not None and is_refusal(found.error.code()):
        raise SystemExit(
            "rtrl stream worker: "
            + refusal_sentence(found.error.code(), process_security(), "read", topic)
        )
    if found is None or found.error is not None or not found.partitions:
        raise SystemExit(
            f"rtrl stream worker: topic {topic} does not exist; run `rtrl topics apply` first"
        )
    return len(found.partitions)


def _replication(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    brokers = AdminClient(admin(bootstrap)).list_topics(timeout=30).brokers
    return min(3, len(brokers))


def _worker(args: argparse.Namespace) -> int:
    import sys

    problem = invalid_options(args)
    if problem is not None:
        print(f"rtrl stream worker: {problem}", file=sys.stderr)
        return 2
    if args.child_of is None and not args.no_supervisor:
        import os

        from streams.supervisor import supervise

        return supervise(
            [sys.executable, "-m", "streams", "--child-of", str(os.getpid()), *worker_argv(args)]
        )
    from streams.worker import run_worker

    if args.child_of is not None:
        from infra.lifetime import die_with_parent

        die_with_parent(args.child_of)
    return run_worker(settings_from(args))
