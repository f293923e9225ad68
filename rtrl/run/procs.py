"""Child processes of `rtrl run`: each stage runs as its own `rtrl` subcommand, as it would in
production, with its output in a log file under the run's folder."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infra.lifetime import die_with_parent

log = logging.getLogger("rtrl.run")


@dataclass
class Stage:
    name: str
    args: list[str]
    log_file: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, env: dict[str, str] | None = None) -> Stage:
        """Start the stage in a session of its own (a Ctrl-C to the run is the run's to pass
        on), dying with the run: a run killed before its ``finally`` stopped every stage (its
        deadline's SIGINT, then SIGKILL) left a collector behind, holding its port for good."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        run = os.getpid()
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rtrl.cli", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                start_new_session=True,
                preexec_fn=lambda: die_with_parent(run),  # the main thread starts every stage
            )
        log.info("started %s (pid %d, log %s)", self.name, self.proc.pid, self.log_file)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %.0fs; killing it", self.name, timeout)
            self.proc.kill()
            self.proc.wait(10)
        log.info("stopped %s", self.name)


def run_stage(
    name: str, args: list[str], log_file: Path, timeout: float = 600, ok: tuple[int, ...] = (0,)
) -> str:
    """Run a one-shot `rtrl` subcommand to completion; return its output, raise when its exit
    code is not one of ``ok``. Its log (stderr) reaches ``log_file`` as it is written, so a
    long stage's progress can be followed there; its output follows when it ends. It dies with
    the run, as a :class:`Stage` does: a run killed during `rtrl train` left the round training
    on every core, with its llama-server, for the tests after it."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    run = os.getpid()
    with open(log_file, "a") as log_out:
        start = log_out.tell()
        done = subprocess.run(
            [sys.executable, "-m", "rtrl.cli", *args],
            stdout=subprocess.PIPE,
            stderr=log_out,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            preexec_fn=lambda: die_with_parent(run),  # the main thread runs every stage
        )
        log_out.write(done.stdout)
    if done.returncode not in ok:
        written = log_file.read_bytes()[start:].decode(errors="replace")
        tail = "\n".join(written.strip().splitlines()[-15:])
        raise RuntimeError(f"`rtrl {' '.join(args)}` failed ({done.returncode}):\n{tail}")
    return done.stdout


def wait_until(
    what: str, ready: Callable[[], bool], timeout: float, stage: Stage | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if stage is not None and not stage.alive():
            raise RuntimeError(f"{stage.name} exited; see {stage.log_file}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready within {timeout:.0f}s")
        time.sleep(0.5)


def http_ready(port: int) -> bool:
    """Whether a service on this machine's ``port`` answers its ``/readyz`` with 200."""
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
