"""`rtrl stream worker` is registered on the roof CLI and reads its arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtrl.cli import build_parser


def test_stream_worker_arguments() -> None:
    args = build_parser().parse_args(
        ["stream", "worker", "--bootstrap", "k:1", "--topic-prefix", "p.", "--data-dir", "/tmp/x",
         "--store", "memory", "--group-id", "g"])
    assert (args.bootstrap, args.topic_prefix, args.data_dir, args.store, args.group_id) == (
        "k:1", "p.", Path("/tmp/x"), "memory", "g")
    assert callable(args.func)


def test_unknown_store_is_refused() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["stream", "worker", "--store", "redis"])
