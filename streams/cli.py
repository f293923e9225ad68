"""`rtrl stream worker`: the Faust worker that joins events into reward records."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from infra.cli import explain
from infra.settings import admin
from streams.worker_options import WORKER_OPTIONS

if TYPE_CHECKING:
    from streams.settings import WorkerSettings


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
    """The worker's options (``WorkerOptions``), then how this process runs it: under a
    supervisor (the default), alone, or as the supervisor's child (``--child-of``, hidden)."""
    WORKER_OPTIONS.add_to(p)
    p.add_argument(
        "--no-supervisor",
        action="store_true",
        help="run the worker in this process and exit with its code (for a process "
        "manager that restarts it: restart on 75 at once, on 70 after a pause)",
    )
    p.add_argument("--child-of", type=int, default=None, help=argparse.SUPPRESS)


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The worker's own options, to start it again as a child process (its broker resolved)."""
    return WORKER_OPTIONS.argv(WORKER_OPTIONS.read(args))


def settings_from(args: argparse.Namespace, *, ask_broker: bool = True) -> WorkerSettings:
    """The worker's settings; ``ask_broker=False`` checks the command line's values alone (the
    partition count and replication the broker would give are placeholders then)."""
    from infra.topics import TopicNames

    options = WORKER_OPTIONS.read(args)
    topic = TopicNames(options.topic_prefix).events
    return options.settings(
        partitions=_partitions(options.bootstrap, topic) if ask_broker else 1,
        replication=_replication(options.bootstrap) if ask_broker else 1,
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
