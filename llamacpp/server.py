"""A ``llama-server`` child process on one GGUF file: started, waited for, stopped.

``rtrl serve --engine llama.cpp`` starts one for each checkpoint it serves, on that
checkpoint's GGUF model and adapter (``llamacpp.fleet``), and stands in front of them as
an upstream; a server does not outlive the process that started it, even one killed with
SIGKILL; the tests and the benchmark start theirs the same way. The server listens on the
loopback only and serves one model, either with at most one adapter (``lora``: applied to every
request at scale 1, never changed while it runs) or with several loaded and none applied
(``adapters``: each request names its own in its ``lora`` field, so one server serves every
LoRA checkpoint of one base); ``slots`` requests are decoded together (llama.cpp's continuous
batching; requests with different adapters are not batched together), each with
``context / slots`` tokens of context.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from infra.lifetime import die_with_parent

THREAD_CAP_ENV = "OMP_NUM_THREADS"


def capped_threads(threads: int, environ: Mapping[str, str] = os.environ) -> int:
    """``threads``, at most ``OMP_NUM_THREADS`` when it is set: the one knob that says how many
    cores each process may take, which torch honours too.

    Why a cap: llama.cpp's threads meet at a barrier after every operation, so a server whose
    threads outnumber the cores it actually gets (other processes on them: a learner, a second
    server, a second test worker) waits at each barrier for a thread that is not running.
    On 2 cores, two servers of 2 threads decode 54 tokens/s together, two of 1 thread 163
    (``bench/llamacpp_servers.py``, bench/RESULTS.md); beside other busy processes it is worse
    (3-8 against 61-101 in one run here). ``scripts/test`` sets it to the cores per test worker.

    >>> capped_threads(2, {}), capped_threads(2, {"OMP_NUM_THREADS": "1"})
    (2, 1)
    """
    cap = environ.get(THREAD_CAP_ENV, "").strip()
    return max(1, min(threads, int(cap))) if cap.isdigit() and int(cap) > 0 else threads


class EngineStartError(RuntimeError):
    """llama-server exited or did not become healthy; the message holds its log's tail."""


@dataclass(frozen=True)
class EngineConfig:
    binary: Path
    model: Path  # a .gguf file
    port: int
    threads: int = 2
    slots: int = 4
    context: int = 8192  # tokens, shared by the slots
    alias: str | None = None  # the name /v1/models lists (default: the file's)
    lora: Path | None = None  # a GGUF LoRA adapter applied to every request
    adapters: tuple[Path, ...] = ()  # GGUF LoRA adapters loaded at scale 0, chosen per request
    poll: int | None = None  # how hard idle threads spin for work, 0-100 (None: llama.cpp's 50)

    def command(self) -> list[str]:
        """No prompt cache in host memory (``--cache-ram 0``): it moves a prompt's state from
        slot to slot, whoever's it was and whichever adapter computed it, where the gateway
        keeps each slot's cache to one organisation and adapter (``serving.slot_ledger``)."""
        threads = capped_threads(self.threads)
        cmd = [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1",
               "--port", str(self.port), "-t", str(threads), "-np", str(self.slots),
               "-c", str(self.context), "--no-webui", "--cache-ram", "0"]  # fmt: skip
        if self.alias:
            cmd += ["--alias", self.alias]
        if self.poll is not None:
            cmd += ["--poll", str(self.poll)]
        if self.lora is not None and self.adapters:
            raise ValueError("a server either applies one adapter to all or several per request")
        if self.lora is not None:
            cmd += ["--lora", str(self.lora)]
        for adapter in self.adapters:
            cmd += ["--lora", str(adapter)]
        if self.adapters:
            cmd += ["--lora-init-without-apply"]
        return cmd


class LlamaServer:
    """One running ``llama-server``; its output goes to ``log``."""

    def __init__(self, config: EngineConfig, log: Path, start_timeout_s: float = 120) -> None:
        if not config.model.is_file() or config.model.suffix != ".gguf":
            raise EngineStartError(f"{config.model}: llama-server serves a .gguf file")
        self.config = config
        self.url = f"http://127.0.0.1:{config.port}"
        self.log = log
        self._out: IO[bytes] = open(log, "ab")  # noqa: SIM115 - closed in stop()
        parent = os.getpid()
        # a process group of its own (a stop reaches the whole server), and the kernel's SIGKILL
        # when the thread that started it dies: a gateway killed with SIGKILL leaves no server
        # holding its memory and port (the threads that start servers live as long as their
        # process: the main thread, the checkpoint follower's)
        self.proc = subprocess.Popen(
            config.command(),
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: die_with_parent(parent),  # noqa: PLW1509
        )
        try:
            self._wait_healthy(start_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        tail = self.log.read_text(errors="replace")[-2000:]
        raise EngineStartError(f"llama-server did not become healthy on {self.url}:\n{tail}")

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM (llama-server finishes the requests it is decoding), then SIGKILL."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait(10)
        self._out.close()
        return code

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
