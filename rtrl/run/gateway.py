"""`rtrl serve` as a stage of `rtrl run`: started on the run's registry, keys and Kafka, and an
HTTP client for the simulated users that talk to it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from rtrl.run.procs import Stage, http_ready, wait_until

log = logging.getLogger("rtrl.run")


@dataclass(frozen=True)
class GatewaySetup:
    """What every gateway of a run shares: the registry, the API keys, Kafka, its port, and the
    disk spool of its rollouts (``<run>/rollout-spool``: a gateway of the run killed while Kafka
    is down leaves them there, and the run's next gateway delivers them)."""

    registry: str
    keys_db: str
    kafka: list[str]
    port: int
    api_key: str
    seed: int
    timeout_s: float = 120.0  # a user's longest wait for one answer (the code world's are long)
    serve_args: tuple[str, ...] = ()  # every gateway's other options (its engine)


@contextmanager
def gateway(setup: GatewaySetup, checkpoint: str, extra: list[str],
            log_file: Path) -> Iterator[httpx.Client]:  # fmt: skip
    """A running `rtrl serve` starting from ``checkpoint`` (``extra``: its other options), and
    a client of it with the run's API key; stopped on the way out."""
    stage = Stage(
        "gateway",
        ["serve", "--registry", setup.registry, "--checkpoint", checkpoint, "--key-db",
         setup.keys_db, *setup.kafka, "--port", str(setup.port), "--device", "cpu", "--seed",
         str(setup.seed), "--spool-dir", str(Path(setup.registry).parent / "rollout-spool"),
         # the run's own users wait for every answer, which its rounds count: none is refused
         "--slot-wait-s", "0", *setup.serve_args, *extra],
        log_file,
    )  # fmt: skip
    stage.start()
    try:
        # an engine starts its servers first, and may convert a checkpoint for them
        ready_s = 900 if setup.serve_args else 120
        wait_until("gateway", lambda: http_ready(setup.port), ready_s, stage)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{setup.port}",
            headers={"Authorization": f"Bearer {setup.api_key}"},
            timeout=setup.timeout_s,
        ) as http:
            yield http
    finally:
        stage.stop()


def held_rollouts(http: httpx.Client) -> int:
    """The rollouts the gateway behind ``http`` has answered and Kafka not yet acknowledged
    (its ``/readyz`` counts them)."""
    return int(http.get("/readyz").json().get("spooled_rollouts", 0))


def deliver_rollouts(http: httpx.Client | None, timeout_s: float = 60.0) -> None:
    """Wait until Kafka has every rollout the gateway behind ``http`` recorded (None: no
    gateway runs), before the warehouse reads them: its sink reads each topic to its end once,
    and a rollout still in the gateway's spool then (its producer slowed by a busy machine)
    would miss its round. What it misses, the next landing reads."""
    if http is None:
        return
    try:
        wait_until("the gateway's rollouts", lambda: held_rollouts(http) == 0, timeout_s)
    except TimeoutError:
        log.warning("%d rollouts not yet acknowledged by Kafka (kept in the gateway's spool): "
                    "the next landing reads them", held_rollouts(http))  # fmt: skip
    except httpx.HTTPError as exc:
        log.warning("could not ask the gateway what it still holds: %s", exc)


def refused_rollouts(http: httpx.Client) -> int:
    """The answers the gateway behind ``http`` served since it started whose rollout it
    refused (one lacked what a rollout needs, such as a probability llama.cpp left out): never
    trained on or judged (its ``/readyz`` counts them by reason)."""
    return int(sum(http.get("/readyz").json().get("refused_rollouts", {}).values()))
