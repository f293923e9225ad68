"""`rtrl stream worker` is registered on the roof CLI and reads its arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrl.cli import build_parser


def test_stream_worker_arguments() -> None:
    args = build_parser().parse_args(
        [
            "stream",
            "worker",
            "--bootstrap",
            "k:1",
            "--topic-prefix",
            "p.",
            "--data-dir",
            "/tmp/x",
            "--store",
            "memory",
            "--group-id",
            "g",
        ]
    )
    assert (args.bootstrap, args.topic_prefix, args.data_dir, args.store, args.group_id) == (
        "k:1",
        "p.",
        Path("/tmp/x"),
        "memory",
        "g",
    )
    assert callable(args.func)


def test_unknown_store_is_refused() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["stream", "worker", "--store", "redis"])


def test_the_supervised_worker_gets_every_option_of_its_supervisor() -> None:
    """``worker_argv`` rebuilds the child's command line: every worker option survives it."""
    import argparse

    from streams.cli import add_worker_args, worker_argv

    parser = argparse.ArgumentParser()
    add_worker_args(parser)
    given = parser.parse_args(
        [
            "--bootstrap",
            "k:1",
            "--topic-prefix",
            "p.",
            "--data-dir",
            "/tmp/x",
            "--reward-config",
            "/tmp/r.toml",
            "--group-id",
            "g",
            "--store",
            "memory",
            "--rocksdb-mib",
            "32",
            "--deadlines-in-memory",
            "99",
            "--metrics-port",
            "9999",
            "--chunk-size",
            "7",
            "--progress-s",
            "2.5",
        ]
    )
    again = parser.parse_args(worker_argv(given))
    options = {a.dest for a in parser._actions} - {"help", "no_supervisor", "child_of"}
    assert {o: getattr(again, o) for o in options} == {o: getattr(given, o) for o in options}


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rocksdb-mib", "2"], "rocksdb_partition_mib"),
        (["--deadlines-in-memory", "1"], "deadlines_in_memory"),
        (["--chunk-size", "0"], "chunk_size"),
        (["--reward-config", "/nonexistent/reward.toml"], "No such file"),
    ],
)
def test_bad_worker_options_are_refused_before_anything_starts(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["stream", "worker", "--bootstrap", "127.0.0.1:1", *argv])
    assert args.func(args) == 2  # no broker asked, no worker started
    assert said in capsys.readouterr().err


def test_every_field_of_the_worker_options_is_an_option_of_the_command() -> None:
    from streams.worker_options import WORKER_OPTIONS
    from tests.support.settings_options import assert_every_field_is_an_option, subcommand

    assert_every_field_is_an_option(subcommand("stream", "worker"), WORKER_OPTIONS)
