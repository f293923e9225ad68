"""`rtrl up`: the loop's services on one machine, with one command, under supervisord.

It writes the data folder's configuration where there is none, starts supervisord with the
broker, runs the first-time steps once the broker answers (topics, the first checkpoint, an API
key: each skipped when done before), then starts every service. supervisord restarts a service
that dies and keeps each one's log; SIGTERM or Ctrl-C stops them all, the broker last. What each
service is and does is `rtrl/up_plan.py`'s; the same topology across machines is
docs/operations.md's.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from infra.lifetime import sigterm_stops
from infra.settings_cli import SettingsOptions, add_command
from rtrl.loop_config import LoopConfig, load_loop_config
from rtrl.up_plan import SERVICES, UpSettings, fresh_config, service_commands, supervisord_conf

log = logging.getLogger("rtrl.up")
OPTIONS = SettingsOptions(UpSettings)
BROKER_WAIT_S = 180.0
STOP_WAIT_S = 120.0  # supervisord gives each service 30 s, one after another where they hang


def register(sub: argparse._SubParsersAction) -> None:
    add_command(
        sub,
        "up",
        _up,
        OPTIONS,
        help="start the loop's services on this machine (supervisord); Ctrl-C stops them",
        description="Broker, collector, stream worker, warehouse sink, batch builder, trainer, "
        "gateway, canary and live page, each with its log under DATA_DIR/logs, restarted by "
        "supervisord when it dies. The first time, it writes DATA_DIR/rtrl.toml (unless "
        "rtrl --config names one), creates the topics, the first checkpoint and an API key "
        "(saved in DATA_DIR/api-key). `python -m supervisor.supervisorctl -c "
        "DATA_DIR/supervisord.conf status` shows each service.",
    )


def _up(args: argparse.Namespace) -> int:
    return up(OPTIONS.read(args), args.config_file)


def up(settings: UpSettings, config_file: str | None = None) -> int:
    """Run the topology until SIGTERM or Ctrl-C, then stop it; 1 when it could not start."""
    settings.logs.mkdir(parents=True, exist_ok=True)
    config = Path(config_file) if config_file else settings.config_file
    if not config.exists():
        config.write_text(fresh_config(settings))
        log.info("wrote the configuration %s", config)
    loop = load_loop_config(config)
    if settings.first_steps_only:
        first_steps(settings, config, loop, local_broker=False)
        return 0
    conf = settings.data_dir / "supervisord.conf"
    conf.write_text(supervisord_conf(settings, [sys.executable, "-m", "rtrl.cli"], config))
    supervisord = subprocess.Popen(
        [sys.executable, "-m", "supervisor.supervisord", "-c", str(conf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    stopping = sigterm_stops()
    try:
        first_steps(settings, config, loop)
        _ctl(conf, "start", f"{SERVICES}:*")
        _say_where(settings, loop)
        while supervisord.poll() is None and not stopping():
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    except (RuntimeError, TimeoutError) as exc:
        log.error("rtrl up could not start: %s", exc)
        return _stop(supervisord) or 1
    return _stop(supervisord)


def first_steps(
    settings: UpSettings, config: Path, loop: LoopConfig, local_broker: bool = True
) -> None:
    """Topics, the first checkpoint and an API key, once the broker answers (the local one on
    its port, else the configured Kafka, asked again until it does); each one skipped where an
    earlier start made it."""
    if local_broker:
        _wait_for_port(settings.kafka_port, BROKER_WAIT_S)
    warehouse = loop.paths.warehouse or ".rtrl/warehouse"
    if "://" not in warehouse:  # the sink makes it at its first flush; the batch builder reads
        Path(warehouse).mkdir(parents=True, exist_ok=True)  # it before that
    rtrl = [sys.executable, "-m", "rtrl.cli", "--config", str(config)]
    deadline = time.monotonic() + BROKER_WAIT_S
    while True:  # the broker may still be starting: its port open, its metadata not yet
        try:
            _run([*rtrl, "topics", "apply"], settings.logs / "first-steps.log")
            break
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            log.info("Kafka is not answering yet: the topics again in 5 s")
            time.sleep(5)
    from checkpoints.store import CheckpointRegistry

    registry = Path(loop.paths.registry or ".rtrl/checkpoints")
    if not CheckpointRegistry(registry).list():
        _run([*rtrl, "checkpoints", "init", "--id", "base-0000", "--model", settings.model,
              "--publish"], settings.logs / "first-steps.log")  # fmt: skip
        log.info("the first checkpoint base-0000 is %s", settings.model)
    key_file = settings.data_dir / "api-key"
    if not key_file.exists():
        out = _run([*rtrl, "keys", "create", "--org", settings.org],
                   settings.logs / "first-steps.log")  # fmt: skip
        key_file.write_text(out.strip().split()[-1] + "\n")
        key_file.chmod(0o600)
        log.info("an API key of %s is in %s", settings.org, key_file)


def _say_where(settings: UpSettings, loop: LoopConfig) -> None:
    services = ", ".join(service_commands(settings))
    log.info("running: broker, %s; logs in %s; Ctrl-C stops them all", services, settings.logs)
    log.info("the collector http://127.0.0.1:%d, the gateway http://127.0.0.1:%d/v1, the "
             "live page http://127.0.0.1:%d/", settings.collector_port, settings.gateway_port,
             settings.console_port)  # fmt: skip


def _stop(supervisord: subprocess.Popen[bytes]) -> int:
    """SIGTERM to supervisord, which stops every service and then the broker; 0 once it has."""
    if supervisord.poll() is None:
        log.info("stopping every service, then the broker")
        supervisord.send_signal(signal.SIGTERM)
        try:
            supervisord.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            log.error("supervisord did not stop in %.0f s: killed", STOP_WAIT_S)
            os.killpg(supervisord.pid, signal.SIGKILL)
            supervisord.wait()
            return 1
    log.info("stopped")
    return 0


def _ctl(conf: Path, *command: str) -> None:
    _run([sys.executable, "-m", "supervisor.supervisorctl", "-c", str(conf), *command], None)


def _run(argv: list[str], log_file: Path | None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if log_file is not None:
        with log_file.open("a") as f:
            f.write(f"$ {' '.join(argv)}\n{done.stderr}")
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-800:]}")  # fmt: skip
    return done.stdout


def _wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(1)
    raise TimeoutError(f"the broker did not answer on port {port} in {timeout:.0f} s")
