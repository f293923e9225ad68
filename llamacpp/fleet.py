"""The llama-server processes of ``rtrl serve --engine llama.cpp``: one for each checkpoint it
serves, started on that checkpoint's GGUF files, or one for several LoRA checkpoints of one base
(:meth:`EngineFleet.start_shared`: adapters chosen per request), each stopped once no request
admitted to it is left.

Why one server per checkpoint, and a new one for each promotion: this llama.cpp loads adapters
only at start (``--lora``; ``POST /lora-adapters`` sets scales of adapters already loaded), and a
full-weights checkpoint is another model file, so a checkpoint the server was not started with
needs a server started for it. Starting it beside the old one, then moving new requests to it,
then stopping the old one when its last admitted request has finished, is what makes a switch
clean: an answer comes wholly from one server, which holds one checkpoint's weights, so no
answer mixes two, and each is recorded with the checkpoint of the server that produced it.
Changing global adapter scales on a running server instead would change the weights under the
requests it is decoding. The price is memory: two servers for the length of the drain.

Conversion runs in a child process (``python -m llamacpp.convert``), so that the gateway
never loads torch; a base checkpoint whose base is a GGUF file needs none (unless ``exact``).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from infra.ports import free_port_block
from llamacpp.convert import EngineWeights, base_gguf
from llamacpp.engine_settings import EngineSettings
from llamacpp.server import EngineConfig, LlamaServer

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent


def threads_per_server(threads: int, servers: int) -> int:
    """Each server's share of the gateway's ``threads``, for ``servers`` running at once.

    Why divide: llama.cpp's workers spin while they wait for work (``--poll``), so two servers
    that each take every core fight over them. Measured on 2 cores, 16 slots each, SmolLM2:
    one server with 2 threads 161 tokens/s; two with 2 threads each 54 together; two with 1
    thread each 163 together (bench/RESULTS.md).

    >>> threads_per_server(2, 2), threads_per_server(8, 3), threads_per_server(2, 1)
    (1, 2, 2)
    """
    return max(1, threads // max(1, servers))


def servers_for(kinds: Sequence[str], share_base: bool) -> int:
    """How many servers serve checkpoints of these weights kinds at once: one each, or, sharing
    the base, one for the base and its LoRA checkpoints and one for each full-weights one.

    >>> servers_for(["base", "lora", "lora"], True), servers_for(["lora", "full"], True)
    (1, 2)
    >>> servers_for(["base", "lora"], False)
    2
    """
    if not share_base:
        return len(kinds)
    full = sum(k == "full" for k in kinds)
    return full + (len(kinds) > full)


def adapter_scales(adapters: tuple[str, ...], checkpoint_id: str) -> list[dict[str, float]] | None:
    """The ``lora`` field of a request for ``checkpoint_id`` on a server that loaded
    ``adapters`` (each one's checkpoint, in order): its adapter at scale 1, every other at 0
    (all at 0: the base); None on a server of one checkpoint, which needs no field.

    >>> adapter_scales(("a", "b"), "b")
    [{'id': 0, 'scale': 0.0}, {'id': 1, 'scale': 1.0}]
    >>> adapter_scales(("a", "b"), "base"), adapter_scales((), "a")
    ([{'id': 0, 'scale': 0.0}, {'id': 1, 'scale': 0.0}], None)
    """
    if not adapters:
        return None
    return [{"id": i, "scale": 1.0 if a == checkpoint_id else 0.0} for i, a in enumerate(adapters)]


class ServedEngine:
    """One running server, for one checkpoint or for several LoRA checkpoints of one base
    (``adapters``: the checkpoint of each adapter the server loaded, in its order), with the
    requests admitted to it counted: a request takes a lease when it is bound to this server and
    gives it back when answered."""

    def __init__(
        self, checkpoint_id: str, server: LlamaServer, adapters: tuple[str, ...] = ()
    ) -> None:
        self.checkpoint_id = checkpoint_id  # what it serves, in logs (several: joined by "+")
        self.server = server
        self.adapters = adapters
        self.url = server.url
        self.retired = False
        self.restarts = 0  # times its process died and was started again
        self._leases = 0
        self._idle = threading.Condition()
        self._reviving = threading.Lock()

    def revive(self, timeout_s: float) -> bool:
        """Start the server again, on the same port and files, if its process has exited
        (killed, crashed, out of memory) and it is not being retired; whether it serves now.
        A request it was decoding failed with it; the gateway asks that one again."""
        with self._reviving:
            if self.server.proc.poll() is None:
                return True
            if self.retired:
                return False
            dead = self.server
            log.warning(
                "serving: llama-server for %s (pid %d) exited with %s; starting it again on "
                "port %d",
                self.checkpoint_id,
                dead.proc.pid,
                dead.proc.returncode,
                dead.config.port,
            )
            dead.stop()
            started = time.monotonic()
            try:
                alive = LlamaServer(dead.config, dead.log, timeout_s)
            except Exception as exc:  # noqa: BLE001 - logged; the next look tries again
                log.error("serving: llama-server for %s did not start again: %s",
                          self.checkpoint_id, exc)  # fmt: skip
                return False
            self.restarts += 1  # first: whoever sees the new server sees the restart
            self.server = alive
            log.info("serving: llama-server for %s up again in %.1f s (restart %d)",
                     self.checkpoint_id, time.monotonic() - started, self.restarts)  # fmt: skip
            return True

    def lease(self) -> None:
        with self._idle:
            self._leases += 1

    def release(self) -> int:
        """Give a lease back; the leases left."""
        with self._idle:
            self._leases -= 1
            if self._leases == 0:
                self._idle.notify_all()
            return self._leases

    def lora(self, checkpoint_id: str) -> list[dict[str, float]] | None:
        """The ``lora`` field of a request for ``checkpoint_id`` (:func:`adapter_scales`)."""
        return adapter_scales(self.adapters, checkpoint_id)

    @property
    def in_flight(self) -> int:
        with self._idle:
            return self._leases

    def drained(self, timeout_s: float) -> bool:
        """Wait until no admitted request is left (False: ``timeout_s`` passed first)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._leases == 0, timeout_s)


class EngineFleet:
    def __init__(self, settings: EngineSettings, registry: CheckpointRegistry,
                 budget: int | None = None) -> None:  # fmt: skip
        """``settings.threads``: each new server's; ``budget``: the threads all its servers
        share (default ``settings.threads``), which the gateway divides among them again as
        servers join and leave (``serving.backends.llamacpp_engine``)."""
        self.settings = settings
        self.budget = budget or settings.threads
        self._registry = registry
        self._lock = threading.Lock()
        self._running: list[ServedEngine] = []
        self._retiring: list[threading.Thread] = []
        self._closed = threading.Event()
        self._restarts_stopped = 0  # the restarts of servers no longer running
        self._watchdog = threading.Thread(target=self._watch, name="rtrl-engine-watchdog",
                                          daemon=True)  # fmt: skip
        self._watchdog.start()

    def _watch(self, every_s: float = 1.0) -> None:
        """Every second, start again any server whose process died, so that recovery does not
        wait for a request to find it dead."""
        while not self._closed.wait(every_s):
            with self._lock:
                engines = list(self._running)
            for engine in engines:
                if engine.server.proc.poll() is not None and not engine.retired:
                    engine.revive(self.settings.start_timeout_s)

    def restarts(self) -> int:
        """Servers started again after their process died, in all (stopped ones' too)."""
        with self._lock:
            return self._restarts_stopped + sum(e.restarts for e in self._running)

    def weights(self, info: CheckpointInfo) -> EngineWeights:
        """``info``'s GGUF files: a GGUF base as it is, anything else converted (cached) by a
        child process."""
        base = Path(info.model.base_path)
        if info.weights.kind == "base" and base.suffix == ".gguf" and not self.settings.exact:
            return EngineWeights(base_gguf(info.model, self.settings.cache_root, Path()))
        cmd = [
            sys.executable,
            "-m",
            "llamacpp.convert",
            "--registry",
            str(self._registry.root),
            "--checkpoint",
            info.checkpoint_id,
            "--outtype",
            self.settings.outtype,
        ]
        if self.settings.exact:
            cmd.append("--exact")
        if self.settings.converted_dir is not None:
            cmd += ["--out-dir", str(self.settings.converted_dir)]
        env = {
            **os.environ,
            "RTRL_CACHE_DIR": str(self.settings.cache_root),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        started = time.monotonic()
        log.info(
            "serving: converting %s (%s weights) for llama.cpp",
            info.checkpoint_id,
            info.weights.kind,
        )
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=self.settings.convert_timeout_s
        )
        for line in done.stderr.splitlines():
            if line.startswith("llama.cpp"):
                log.info("serving: %s", line)
        if done.returncode != 0:
            raise RuntimeError(f"{info.checkpoint_id} was not converted: {done.stderr[-1500:]}")
        weights = EngineWeights.from_json(json.loads(done.stdout.strip().splitlines()[-1]))
        log.info(
            "serving: %s ready for llama.cpp in %.1f s",
            info.checkpoint_id,
            time.monotonic() - started,
        )
        return weights

    def start(self, info: CheckpointInfo) -> ServedEngine:
        """A server for ``info``, healthy (its GGUF files converted first when needed)."""
        return self.start_on(info.checkpoint_id, self.weights(info))

    def start_on(self, checkpoint_id: str, weights: EngineWeights) -> ServedEngine:
        """A server for ``checkpoint_id`` on GGUF files already converted (a candidate not
        registered yet: ``llamacpp.convert.unregistered_lora_gguf``), healthy."""
        s = self.settings
        port = free_port_block(1)
        config = EngineConfig(
            s.binary,
            weights.model,
            port,
            s.threads,
            s.slots,
            s.context,
            alias=checkpoint_id,
            lora=weights.lora,
        )
        s.log_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        server = LlamaServer(config, s.log_dir / f"llama-server-{port}.log", s.start_timeout_s)
        log.info(
            "serving: llama-server for %s on port %d (%s%s), up in %.1f s",
            checkpoint_id,
            port,
            weights.model.name,
            f" + {weights.lora.name}" if weights.lora else "",
            time.monotonic() - started,
        )
        engine = ServedEngine(checkpoint_id, server)
        with self._lock:
            self._running.append(engine)
        return engine

    def start_shared(self, members: dict[str, EngineWeights]) -> ServedEngine:
        """One server for several checkpoints on the same GGUF model: each LoRA checkpoint's
        adapter loaded at scale 0 and chosen per request (``ServedEngine.lora``), a base member
        served with none. Why: one server for an A/B's arms, a canary and its parent decodes
        with every thread, where one server per checkpoint would divide them."""
        models = {w.model for w in members.values()}
        if len(models) != 1:
            raise ValueError(
                f"a shared server serves one model file, not {sorted(map(str, models))}"
            )
        s = self.settings
        members = dict(sorted(members.items()))
        adapters = tuple((c, w.lora) for c, w in members.items() if w.lora is not None)
        label = "+".join(members)
        port = free_port_block(1)
        config = EngineConfig(s.binary, models.pop(), port, s.threads, s.slots, s.context,
                              alias=label, adapters=tuple(p for _, p in adapters))  # fmt: skip
        s.log_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        server = LlamaServer(config, s.log_dir / f"llama-server-{port}.log", s.start_timeout_s)
        log.info(
            "serving: one llama-server for %s on port %d (%s, %d adapters), up in %.1f s",
            ", ".join(members),
            port,
            config.model.name,
            len(adapters),
            time.monotonic() - started,
        )
        engine = ServedEngine(label, server, tuple(c for c, _ in adapters))
        with self._lock:
            self._running.append(engine)
        return engine

    def restart_with(self, engine: ServedEngine, threads: int) -> ServedEngine:
        """A new server on ``engine``'s files and a new port with ``threads`` threads, healthy;
        ``engine`` goes on serving until the caller moves its requests and retires it."""
        old = engine.server
        config = replace(old.config, port=free_port_block(1), threads=threads)
        started = time.monotonic()
        server = LlamaServer(config, self.settings.log_dir / f"llama-server-{config.port}.log",
                             self.settings.start_timeout_s)  # fmt: skip
        log.info("serving: llama-server for %s again on port %d with %d thread(s) (was %d on "
                 "port %d), up in %.1f s", engine.checkpoint_id, config.port, threads,
                 old.config.threads, old.config.port, time.monotonic() - started)  # fmt: skip
        fresh = ServedEngine(engine.checkpoint_id, server, engine.adapters)
        with self._lock:
            self._running.append(fresh)
        return fresh

    def retire(self, engine: ServedEngine) -> None:
        """Stop ``engine`` once every request admitted to it has been answered (on a thread of
        its own: nothing waits for it); no new request is bound to it any more."""
        engine.retired = True
        thread = threading.Thread(
            target=self._drain_and_stop,
            args=(engine,),
            name=f"rtrl-retire-{engine.checkpoint_id}",
            daemon=True,
        )
        with self._lock:
            self._retiring.append(thread)
        thread.start()

    def _drain_and_stop(self, engine: ServedEngine) -> None:
        started, waiting = time.monotonic(), engine.in_flight
        if not engine.drained(self.settings.drain_timeout_s):
            log.warning(
                "serving: %s still had %d requests after %.0f s; stopping its server",
                engine.checkpoint_id,
                engine.in_flight,
                self.settings.drain_timeout_s,
            )
        self._stop(engine)
        log.info(
            "serving: llama-server for %s stopped after draining %d requests in %.1f s",
            engine.checkpoint_id,
            waiting,
            time.monotonic() - started,
        )

    def _stop(self, engine: ServedEngine) -> None:
        with self._lock:
            if engine not in self._running:
                return
            self._running.remove(engine)
            self._restarts_stopped += engine.restarts
        engine.server.stop()

    def running(self) -> list[str]:
        """The checkpoints whose servers are running now."""
        with self._lock:
            return [e.checkpoint_id for e in self._running]

    def close(self, timeout_s: float = 30) -> None:
        """Stop every server (the gateway has answered what it admitted)."""
        self._closed.set()
        with self._lock:
            threads, engines = list(self._retiring), list(self._running)
        for thread in threads:
            thread.join(timeout_s)
        for engine in engines:
            self._stop(engine)
