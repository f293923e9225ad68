"""`rtrl broker ...` and `rtrl topics ...` as a user runs them: separate processes, exit codes."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from infra import broker
from infra.broker_config import ClusterLayout
from infra.settings import admin
from infra.topics import TOPICS
from tests.infra.infra_probe import quiet_port_block, rtrl_subcommands

REPO = Path(__file__).resolve().parents[2]


def rtrl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtrl.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_help_lists_every_registered_subcommand():
    done = rtrl("--help")
    assert done.returncode == 0
    _, commands = rtrl_subcommands()
    assert {"broker", "topics"} <= set(commands)
    for name in commands:
        assert f"    {name} " in done.stdout or f"    {name}\n" in done.stdout, name


def test_topics_apply_twice_changes_nothing_the_second_time(kafka_bootstrap):
    prefix = f"cli{uuid.uuid4().hex[:8]}."
    args = (
        "topics",
        "apply",
        "--bootstrap",
        kafka_bootstrap,
        "--topic-prefix",
        prefix,
        "--replication",
        "1",
    )
    first, second = rtrl(*args), rtrl(*args)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    rows = [line.split() for line in first.stdout.splitlines()]
    assert sorted(r[1] for r in rows) == sorted(prefix + s.base for s in TOPICS)
    assert {r[0] for r in rows} == {"create"}
    assert {line.split()[0] for line in second.stdout.splitlines()} == {"unchanged"}
    topics = AdminClient(admin(kafka_bootstrap)).list_topics(timeout=10).topics
    assert all(len(topics[prefix + s.base].partitions) == s.partitions for s in TOPICS)


def test_broker_start_refuses_a_taken_port_and_says_which(tmp_path):
    port = quiet_port_block(2)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        done = rtrl("broker", "start", "--port", str(port), "--data-dir", str(tmp_path / "k"))
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr
    assert "--port" in done.stderr
    assert not (tmp_path / "k" / "cluster.json").exists(), "nothing should have been formatted"


def test_broker_status_of_a_cluster_never_started_is_down(tmp_path):
    done = rtrl("broker", "status", "--data-dir", str(tmp_path / "none"))
    assert done.returncode == 1
    assert done.stdout.startswith("down: 0/1")


@pytest.mark.slow
def test_broker_start_status_stop_end_to_end(tmp_path):
    data = tmp_path / "k"
    port = quiet_port_block(2)
    layout = ClusterLayout(data.resolve(), port=port)
    try:
        started = rtrl("broker", "start", "--port", str(port), "--data-dir", str(data))
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip().splitlines()[-1] == f"127.0.0.1:{port}"
        up = rtrl("broker", "status", "--data-dir", str(data))
        assert (up.returncode, up.stdout.split()[:2]) == (0, ["up:", "1/1"])
        md = AdminClient(admin(f"127.0.0.1:{port}")).list_topics(timeout=10)
        assert len(md.brokers) == 1
        again = rtrl("broker", "start", "--port", str(port), "--data-dir", str(data))
        assert again.returncode == 0, "starting a running cluster is a no-op"
        stopped = rtrl("broker", "stop", "--data-dir", str(data))
        assert stopped.returncode == 0 and "stopped 1 node(s)" in stopped.stdout
        down = rtrl("broker", "status", "--data-dir", str(data))
        assert (down.returncode, down.stdout.split()[0]) == (1, "down:")
        assert broker.running_nodes(layout) == []
    finally:
        broker.stop(layout)


def test_every_settings_field_is_an_option_of_its_command() -> None:
    from infra.cluster_options import (
        APPLY_OPTIONS,
        DATA_DIR_OPTIONS,
        LIST_OPTIONS,
        START_OPTIONS,
    )
    from tests.support.settings_options import assert_every_field_is_an_option, subcommand

    for names, options in (
        (("broker", "start"), START_OPTIONS),
        (("broker", "stop"), DATA_DIR_OPTIONS),
        (("broker", "status"), DATA_DIR_OPTIONS),
        (("topics", "apply"), APPLY_OPTIONS),
        (("topics", "list"), LIST_OPTIONS),
    ):
        assert_every_field_is_an_option(subcommand(*names), options)
