"""What `rtrl up` starts, as data: the one configuration it writes for a fresh data folder, each
service's command line, and the supervisord configuration that runs them (pure: no process is
started here; ``rtrl/up.py`` does that).

supervisord is the supervisor (a well-kept process manager from PyPI): it starts each service
with its log, restarts one that dies, and stops them all on SIGTERM, the broker last. The
broker starts first and alone; the first-time steps (topics, the first checkpoint, a key) run
once it answers, and only then the services, which need all three.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BROKER = "broker"
SERVICES = "services"  # supervisord's group of every service but the broker

# `rtrl train`'s recipe on a CPU: a LoRA adapter (minutes, not an hour of full fine-tuning) at
# the code world's rate and KL target (rtrl/worlds/code_world.py: CodeWorldSettings.learner),
# and small candidate evals of the round's own prompts. Where the mismatch check finds the
# recorded log-probabilities the learner's own (an exact engine: ~1e-5 nats a token), they are
# the update's pi_old and no scoring pass precedes it (10 of a SmolLM2 round's 24 minutes in a
# soak that served the 4-bit file, bench/RESULTS.md); elsewhere the pass runs as before.
CPU_TRAIN_ARGS = (
    "--lora-r", "16", "--lora-alpha", "32", "--lr", "0.0004", "--epochs", "2",
    "--minibatches", "4", "--micro-batch", "8", "--device", "cpu", "--clip", "0.3",
    "--target-kl", "0.006", "--mismatch-sample", "16", "--exact-behaviour-kl", "0.0001",
    "--eval-prompts", "4", "--eval-samples", "2",
)  # fmt: skip


class UpSettings(BaseModel):
    """`rtrl up`'s options: where the topology keeps its data, what it serves, on which ports."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = Field(Path(".rtrl/up"), description="every service's data and logs")
    model: str = Field(
        "smollm2-135m", description="the first checkpoint's model (smollm2-135m, tiny, a path)"
    )
    engine: Literal["llama.cpp", "transformers"] = Field(
        "llama.cpp", description="what the gateway serves with (llama.cpp needs its build)"
    )
    engine_exact: bool = Field(
        True,
        description="llama.cpp: serve the GGUF base as the learner computes it (`rtrl serve "
        "--engine-exact`: its dequantized weights at f16, converted once and cached; as fast as "
        "the 4-bit file on a CPU, bench/RESULTS.md), so that the trainer's update takes the "
        "recorded log-probabilities as its own and skips its scoring pass",
    )
    org: str = Field("default", description="the organisation of the first API key")
    kafka_port: int = Field(9092, ge=1, le=65535, description="the broker's client port")
    collector_port: int = Field(8600, ge=1, le=65535, description="the collector's port")
    gateway_port: int = Field(8000, ge=1, le=65535, description="the gateway's port")
    console_port: int = Field(8650, ge=0, le=65535, description="the live page's port")
    metrics_port: int = Field(
        9101, ge=1, le=65000, description="the first service's metrics port (one each, upwards)"
    )
    train_args: str = Field(
        shlex.join(CPU_TRAIN_ARGS),
        description="`rtrl train`'s learner and eval options, as one text (--train-args='...')",
    )
    check_every_s: float = Field(
        60.0, gt=0, description="how often the batch builder, trainer and canary look again"
    )
    first_steps_only: bool = Field(
        False, description="only the first-time steps, against the configured Kafka, then exit "
        "(docker compose's setup; another supervisor runs the services)"
    )  # fmt: skip

    @property
    def config_file(self) -> Path:
        return self.data_dir / "rtrl.toml"

    @property
    def logs(self) -> Path:
        return self.data_dir / "logs"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"


def fresh_config(settings: UpSettings) -> str:
    """The configuration `rtrl up` writes into a data folder that has none: every path inside
    the folder, Kafka on the broker it starts; the rest at each command's defaults."""
    d = settings.data_dir
    return f"""# rtrl up's configuration for {d}: every service reads it (docs/operations.md).
[kafka]
bootstrap = "{settings.bootstrap}"

[paths]
warehouse = "{d / "warehouse"}"
catalog = "{d / "warehouse" / "warehouse.duckdb"}"
registry = "{d / "checkpoints"}"
key_db = "{d / "keys.sqlite"}"
"""


def metrics_ports(settings: UpSettings) -> dict[str, int]:
    """Each service with a Prometheus endpoint, and its port."""
    names = ("collector", "stream", "sink", "gateway", "trainer", "batches", "canary")
    return {name: settings.metrics_port + n for n, name in enumerate(names)}


def service_commands(settings: UpSettings) -> dict[str, list[str]]:
    """Each service's `rtrl` arguments after ``--config``: the topology of
    docs/operations.md on one machine."""
    ports, every = metrics_ports(settings), str(settings.check_every_s)
    serve_engine = ["--engine", "llama.cpp"] if settings.engine == "llama.cpp" else []
    if serve_engine and settings.engine_exact:
        serve_engine.append("--engine-exact")
    metrics = [f"http://127.0.0.1:{port}/metrics" for port in ports.values()]
    return {
        "collector": ["collector", "--port", str(settings.collector_port),
                      "--metrics-port", str(ports["collector"])],
        "stream": ["stream", "worker", "--data-dir", str(settings.data_dir / "stream"),
                   "--metrics-port", str(ports["stream"]), "--no-supervisor"],
        "sink": ["warehouse", "sink", "--metrics-port", str(ports["sink"])],
        "batches": ["batches", "build", "--watch", "--interval-s", every,
                    "--metrics-port", str(ports["batches"])],
        "trainer": ["train", "--watch", "--publish", "--interval-s", every,
                    "--metrics-port", str(ports["trainer"]), *shlex.split(settings.train_args)],
        "gateway": ["serve", "--port", str(settings.gateway_port),
                    "--metrics-port", str(ports["gateway"]), *serve_engine],
        "canary": ["canary", "decide", "--watch", "--publish", "--interval-s", every,
                   "--metrics-port", str(ports["canary"])],
        "console": ["console", "--port", str(settings.console_port), "--metrics", *metrics],
    }  # fmt: skip


def core_shares(cores: int) -> dict[str, int]:
    """The machine's cores shared between the two services that compute: the gateway (its
    llama-servers, or torch) and the trainer (torch, and its eval llama-server), each capped
    through ``OMP_NUM_THREADS`` (torch and ``llamacpp.server.capped_threads`` honour it).
    llama.cpp's threads meet at a barrier after every operation, so a server whose threads
    outnumber the cores it gets beside a training torch waits at each for one descheduled: a
    SmolLM2 soak with both at 2 threads on 2 cores answered requests in over 300 s.

    >>> core_shares(2), core_shares(16), core_shares(1)
    ({'gateway': 1, 'trainer': 1}, {'gateway': 8, 'trainer': 8}, {'gateway': 1, 'trainer': 1})
    """
    trainer = max(1, cores // 2)
    return {"gateway": max(1, cores - trainer), "trainer": trainer}


def broker_command(settings: UpSettings) -> list[str]:
    return ["broker", "start", "--foreground", "--port", str(settings.kafka_port),
            "--data-dir", str(settings.data_dir / "kafka")]  # fmt: skip


def supervisord_conf(settings: UpSettings, rtrl: list[str], config_file: Path) -> str:
    """supervisord's configuration: the broker (started with supervisord, stopped last) and the
    services (started by `rtrl up` once the first-time steps are done; each restarted when it
    dies, given 30 s to stop on SIGTERM). ``rtrl`` is how to run the console script."""
    d, logs = settings.data_dir.resolve(), settings.logs.resolve()
    lines = [
        "[supervisord]", f"logfile = {logs / 'supervisord.log'}",
        f"pidfile = {d / 'supervisord.pid'}", "nodaemon = true", "",
        "[unix_http_server]", f"file = {d / 'supervisor.sock'}", "",
        "[supervisorctl]", f"serverurl = unix://{d / 'supervisor.sock'}", "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface", "",
    ]  # fmt: skip
    base = [*rtrl, "--config", str(config_file.resolve())]
    programs = {BROKER: broker_command(settings)} | service_commands(settings)
    shares = core_shares(os.cpu_count() or 1)
    for name, args in programs.items():
        first = name == BROKER
        lines += [
            f"[program:{name}]",
            f"command = {shlex.join([*base, *args])}",
            f"directory = {Path.cwd()}",
            f"autostart = {str(first).lower()}",
            "autorestart = true",
            "startsecs = 5",
            "stopsignal = TERM",
            "stopwaitsecs = 30",
            "stopasgroup = true",
            "killasgroup = true",
            f"priority = {1 if first else 100}",  # started first, stopped last
            "redirect_stderr = true",
            f"stdout_logfile = {logs / f'{name}.log'}",
            *([f'environment = OMP_NUM_THREADS="{shares[name]}"'] if name in shares else []),
            "stdout_logfile_maxbytes = 50MB",
            "",
        ]
    services = ",".join(name for name in programs if name != BROKER)
    lines += [f"[group:{SERVICES}]", f"programs = {services}", "priority = 100", ""]
    return "\n".join(lines)
