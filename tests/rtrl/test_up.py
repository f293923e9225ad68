"""`rtrl up` starts the whole topology with one command: the first-time steps (configuration,
topics, first checkpoint, API key), then every service under supervisord, which restarts one
that dies; SIGTERM stops them all, the broker last, and leaves no process behind. The gateway
answers an official `openai` client with the key `rtrl up` made, the collector and the live
page answer, each service has its log. Real parts: the Kafka broker from its jars, supervisord,
the tiny model served by transformers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import psutil
import pytest

from infra.ports import free_port_block

SERVICES = ("collector", "stream", "sink", "batches", "trainer", "gateway", "canary", "console")
START_S = 300.0


def _status(data: Path) -> dict[str, tuple[str, int]]:
    """Each program supervisord runs: its state and pid (0 when it has none)."""
    done = subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c",
                           str(data / "supervisord.conf"), "status"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    out = {}
    for line in done.stdout.splitlines():
        name, state, *rest = line.split()
        pid = int(rest[1].rstrip(",")) if state == "RUNNING" else 0
        out[name.split(":")[-1]] = (state, pid)
    return out


def _left_behind(data: Path) -> list[str]:
    """Processes whose command line names the data folder (the broker's JVMs included)."""
    left = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or ())
        if str(data) in cmdline and p.pid != os.getpid():
            left.append(cmdline[:160])
    return left


def _wait(what: str, ready, timeout: float, up: subprocess.Popen[str]) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not ready():
        assert up.poll() is None, f"rtrl up exited while waiting for {what}"
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s"
        time.sleep(1)


def test_rtrl_up_runs_every_service_restarts_a_dead_one_and_stops_them_all(
    tmp_path: Path,
) -> None:
    data, base = tmp_path / "up", free_port_block(14, highest=65000)
    ports = {"kafka": base, "collector": base + 3, "gateway": base + 4, "console": base + 5}
    argv = [sys.executable, "-m", "rtrl.cli", "up", "--data-dir", str(data), "--model", "tiny",
            "--engine", "transformers", "--kafka-port", str(ports["kafka"]),
            "--collector-port", str(ports["collector"]), "--gateway-port", str(ports["gateway"]),
            "--console-port", str(ports["console"]), "--metrics-port", str(base + 6)]  # fmt: skip
    out = tmp_path / "up.out"
    with out.open("w") as sink:
        up = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        _wait("every service", lambda: "running: broker" in out.read_text(), START_S, up)
        key = (data / "api-key").read_text().strip()
        _wait("the gateway", lambda: _answers(f"http://127.0.0.1:{ports['gateway']}/readyz"),
              120, up)  # fmt: skip
        status = _status(data)
        assert {name: state for name, (state, _) in status.items()} == dict.fromkeys(
            ("broker", *SERVICES), "RUNNING"
        ), status
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{ports['gateway']}/v1", api_key=key,
                               max_retries=0)  # fmt: skip
        answer = client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
        assert answer.choices[0].message.content is not None
        assert _answers(f"http://127.0.0.1:{ports['collector']}/readyz")
        assert _answers(f"http://127.0.0.1:{ports['console']}/")
        named = {"collector", "stream worker", "warehouse sink", "gateway", "trainer",
                 "batch builder", "canary"}  # fmt: skip
        snapshot = f"http://127.0.0.1:{ports['console']}/api/snapshot"
        _wait("the live page's services", lambda: _services(snapshot) == named, 120, up)

        killed = status["collector"][1]
        os.kill(killed, signal.SIGKILL)  # supervisord starts it again
        _wait("the collector's restart",
              lambda: _status(data)["collector"][0] == "RUNNING"
              and _status(data)["collector"][1] != killed, 60, up)  # fmt: skip
        collector = f"http://127.0.0.1:{ports['collector']}/readyz"
        _wait("the restarted collector", lambda: _answers(collector), 60, up)

        up.send_signal(signal.SIGTERM)
        assert up.wait(150) == 0
    finally:
        if up.poll() is None:
            up.kill()
            subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c",
                            str(data / "supervisord.conf"), "shutdown"], timeout=120)  # fmt: skip
    assert _left_behind(data) == []
    said = out.read_text()
    assert "stopping every service, then the broker" in said and "stopped" in said
    for name in ("broker", *SERVICES):
        assert (data / "logs" / f"{name}.log").stat().st_size > 0, name


def _services(snapshot: str) -> set[str]:
    """The services the live page shows up, by name."""
    try:
        rows = httpx.get(snapshot, timeout=10).json()["health"]["services"]
    except (httpx.HTTPError, KeyError, ValueError):
        return set()
    return {row["service"] for row in rows if row["up"]}


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(autouse=True)
def _no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTRL_CONFIG", raising=False)


def test_the_first_steps_alone_are_done_once_against_the_configured_kafka(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docker compose's setup: `rtrl up --first-steps-only` makes the topics, the first
    checkpoint and a key against the configuration's Kafka, then exits; run again (a restarted
    setup) it makes none of them twice."""
    from checkpoints.store import CheckpointRegistry
    from infra.topics import TopicNames

    prefix = f"up{os.getpid()}."
    config = tmp_path / "rtrl.toml"
    config.write_text(f'[kafka]\nbootstrap = "{kafka_bootstrap}"\ntopic_prefix = "{prefix}"\n\n'
                      f'[paths]\nregistry = "{tmp_path / "checkpoints"}"\n'
                      f'key_db = "{tmp_path / "keys.sqlite"}"\n')  # fmt: skip
    argv = [sys.executable, "-m", "rtrl.cli", "--config", str(config), "up", "--first-steps-only",
            "--data-dir", str(tmp_path / "up"), "--model", "tiny"]  # fmt: skip
    keys = []
    for _ in range(2):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        keys.append((tmp_path / "up" / "api-key").read_text())
    assert [c.checkpoint_id for c in CheckpointRegistry(tmp_path / "checkpoints").list()] == [
        "base-0000"
    ]
    assert keys[0] == keys[1] and keys[0].startswith("rtrl_")
    listed = subprocess.run([sys.executable, "-m", "rtrl.cli", "--config", str(config), "keys",
                             "list"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert [line.split()[1] for line in listed.stdout.splitlines()[1:]] == ["default"], listed
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=30).topics
    assert TopicNames(prefix).events in topics and TopicNames(prefix).checkpoints in topics
