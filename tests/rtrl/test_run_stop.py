"""`rtrl run` stopped by SIGTERM (a service manager's stop, a cancelled CI job, `kill`) stops
what it started, the broker last, as Ctrl-C does. The broker runs in a session of its own, so a
run that simply died left it holding its port and half a gigabyte.

Broken once on purpose: without the run's SIGTERM handler the run died at once (exit -15), its
log never said it stopped the broker, and its Kafka node was still running after it; this
failed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.kafka import free_port_block
from tests.support.rtrl_run import stop_left_broker

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_sigterm_stops_the_run_its_stages_and_its_broker(tmp_path: Path) -> None:
    kafka_port, http_port = free_port_block(2), free_port_block(2)  # collector, gateway
    data = tmp_path / "run"
    argv = [sys.executable, "-m", "rtrl.cli", "run", "--data-dir", str(data), "--world",
            "tokens", "--port", str(kafka_port), "--collector-port", str(http_port),
            "--gateway-port", str(http_port + 1), "--rounds", "1", "--round-users", "150",
            "--ab-users", "20", "--window-s", "6"]  # fmt: skip
    output = tmp_path / "output.log"
    with output.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while "started stream worker" not in output.read_text():  # broker and stages are up
            assert proc.poll() is None, output.read_text()[-3000:]
            assert time.monotonic() < deadline, output.read_text()[-3000:]
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        left = stop_left_broker(data)
    text = output.read_text()
    assert proc.returncode == 130, text[-3000:]  # as after Ctrl-C
    assert "stopping the run" in text and "stopped the broker" in text, text[-3000:]
    assert left == 0  # no Kafka node outlived the run
    assert running_under(data) == []  # nor any stage


def running_under(data: Path) -> list[str]:
    """The command lines of the processes still running that name ``data``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # not a process, or it ended meanwhile
            continue
        if str(data) in command:
            found.append(command)
    return found
