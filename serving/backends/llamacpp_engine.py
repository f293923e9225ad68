"""The backend of ``rtrl serve --engine llama.cpp``: llama-server processes that follow the
checkpoints topic.

Every checkpoint it serves, the followed one and any arm's, has a server of its own
(``llamacpp.fleet``), started on its GGUF files: a base on its GGUF file, a LoRA
checkpoint on its base with its converted adapter, full weights on their converted GGUF file.
A newly promoted checkpoint gets its server while the old one goes on serving; then, under the
lock that binds requests to checkpoints, new requests move to it; the old server is stopped once
every request bound to it has been answered (its leases: taken when a request is bound, in
:meth:`EngineBackend.target`, given back when its answer is whole). So a switch drains: a
request admitted before it finishes on the old weights and is recorded with the old checkpoint
id, one admitted after it runs on the new weights, and none straddles. A checkpoint that cannot
be converted or started is logged, and serving stays where it was.

A canary's candidate (``pin``) gets its server before any user lands on it; when the canary is
promoted, the same server becomes the followed one, with no restart.

The servers in use share the gateway's threads (``EngineFleet.budget``): each time one joins or
leaves (an organisation's line or a canary pinned or unpinned, a switch), every server whose
share (``llamacpp.fleet.threads_per_server``) changed is replaced by one on the same files with
its new share, its routes moved under the lock and the old server drained, as on a switch. Why:
each server's threads spin at a barrier on every decoding step, so servers holding more threads
than the machine has cores do not share it, they stall each other. Three organisations' servers
of two threads each on two cores decoded 5-7 tokens/s each, where one server decoded ~80
(bench/RESULTS.md, "The orgs world").

With ``share_base`` (off by default: llama.cpp batches no requests of different adapters
together, so an A/B's arms decode faster on a server each), the checkpoints served at once that
run on the same GGUF model (a base and LoRA checkpoints over it: the followed one, an A/B's
arms, a canary) share one server: each adapter loaded at scale 0 and each request naming its own
in its ``lora`` field (``llamacpp.fleet.ServedEngine.lora``). A checkpoint that joins them gets
a new server with every member's adapter (this llama.cpp loads adapters only at start), the
members' routes move to it under the lock, and the old server drains as on a switch: the same
guarantee, one server's threads instead of a divided share each.

Each completion is asked of its route's server as a llama-server upstream asks its one
(``serving.backends.llamacpp.LlamaCppNative``, held here), with the route's adapter chosen in
the request when its server is shared.

``tool_choice: required`` or a named function is decoded under a GBNF grammar of calls
(``llamacpp.gbnf``, converted by llama.cpp's own schema converter): the servers are our patched
build, which samples grammar-first, so the recorded log-probabilities are of the masked
softmax, and the rollout records the grammar for the learner to replay
(``llamacpp.native.chain_refusal`` names the sampling parameters refused with it).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from llamacpp.build import ensure_schema_converter
from llamacpp.convert import EngineWeights
from llamacpp.fleet import EngineFleet, ServedEngine, threads_per_server
from llamacpp.gbnf import gbnf_tool_call_constraint
from models.constraint import Constraint
from models.generation import Generation
from serving.backends.base import BackendRequest
from serving.backends.llamacpp import LlamaCppNative
from serving.backends.upstream import Route
from serving.backends.upstream_http import UpstreamHttp
from serving.backends.upstream_protocol import UpstreamError
from serving.follower import moves_forward
from serving.protocol import ChatCompletionRequest, CompletionRequest
from serving.routing import CURRENT

log = logging.getLogger("serving")


@dataclass(frozen=True)
class EngineRoute(Route):
    engine: ServedEngine = field(compare=False)


class EngineBackend:
    kind = "llama.cpp engine"
    constrains_tool_calls = True  # under a GBNF grammar, sampled grammar-first (our build)

    def __init__(
        self,
        fleet: EngineFleet,
        registry: CheckpointRegistry,
        checkpoint_id: str,
        pinned: set[str] | frozenset[str] = frozenset(),
        timeout_s: float = 600.0,
        slot_wait_s: float | None = None,
    ) -> None:
        """``slot_wait_s``: how long a request waits for a free slot of its server before it is
        refused as ``overloaded`` (``serving.slot_ledger``; None: as long as it takes)."""
        self._fleet = fleet
        self._weights: dict[str, EngineWeights] = {}
        self._lock = threading.Lock()
        self.switches = 0
        self._forgotten: dict[str, int] = {}  # server url -> the restart its connections are of
        # each route names its server; the servers are our own children: no API key
        self._http = UpstreamHttp({}, timeout_s)
        self._native = LlamaCppNative[EngineRoute](self._http, {}, _url_of, self._adapter_fields,
                                                   slot_wait_s)  # fmt: skip
        self._schema_converter: Path = ensure_schema_converter(
            fleet.settings.cache_root, log=lambda line: log.info("%s", line)
        )
        self._boot = self._start_shared(registry, {checkpoint_id, *pinned})
        info = registry.get(checkpoint_id)
        self._current_info = info
        self._pinned: dict[str, EngineRoute] = {}
        self._current: EngineRoute = self._route_for(info)
        for ckpt in set(pinned):
            self._pinned[ckpt] = self._route_for(registry.get(ckpt))

    def _served(self, checkpoint_id: str) -> EngineRoute | None:
        """The route of a checkpoint already served (followed or pinned), if any."""
        with self._lock:
            routes = [getattr(self, "_current", None), *self._pinned.values()]
        for route in routes:
            if isinstance(route, EngineRoute) and route.checkpoint_id == checkpoint_id:
                return route
        return None

    def _start_shared(self, registry: CheckpointRegistry, ids: set[str]) -> dict[str, ServedEngine]:
        """At start: one server for each model file that several of ``ids`` run on."""
        if not self._fleet.settings.share_base or len(ids) < 2:
            return {}
        for checkpoint_id in sorted(ids):
            self._weights[checkpoint_id] = self._fleet.weights(registry.get(checkpoint_id))
        engines: dict[str, ServedEngine] = {}
        for model in {w.model for w in self._weights.values()}:
            members = {c: w for c, w in self._weights.items() if w.model == model}
            if len(members) > 1:
                engine = self._fleet.start_shared(members)
                engines.update(dict.fromkeys(members, engine))
        return engines

    def _route_for(self, info: CheckpointInfo, keep: set[str] | None = None) -> EngineRoute:
        """``info``'s server: the one already serving it, or a new one (slow: conversion and
        start happen here, on the caller's thread, while serving goes on). With ``share_base``
        the new one also serves the checkpoints of ``keep`` on the same model file, whose
        routes move to it."""
        cid = info.checkpoint_id
        served = self._served(cid)
        if served is not None:
            return served
        identity = info.model.identity()
        if cid in self._boot:
            return EngineRoute(cid, identity, cid, self._boot.pop(cid))
        weights = self._weights.get(cid) or self._fleet.weights(info)
        # only the checkpoints served beside this one can share its server: the others' weights
        # are forgotten (one entry a checkpoint served, and a run promotes without end)
        self._weights = {c: w for c, w in self._weights.items() if c in (keep or ())}
        self._weights[cid] = weights
        group = {c: w for c, w in self._weights.items() if c != cid and w.model == weights.model}
        if not self._fleet.settings.share_base or not group:
            return EngineRoute(cid, identity, cid, self._fleet.start_on(cid, weights))
        engine = self._fleet.start_shared({**group, cid: weights})
        self._move_to(engine, set(group))
        return EngineRoute(cid, identity, cid, engine)

    def _move_to(self, engine: ServedEngine, ids: set[str]) -> None:
        """New requests of ``ids`` go to ``engine``; a server they leave drains and stops."""
        with self._lock:
            left = set()
            if self._current.checkpoint_id in ids:
                left.add(self._engine(self._current))
                self._current = self._moved(self._current, engine)
            for cid, route in self._pinned.items():
                if cid in ids:
                    left.add(self._engine(route))
                    self._pinned[cid] = self._moved(route, engine)
            retire = [e for e in left if e is not engine and not self._in_use(e)]
        for old in retire:
            self._fleet.retire(old)

    @staticmethod
    def _engine(route: EngineRoute) -> ServedEngine:
        return route.engine

    @staticmethod
    def _moved(route: EngineRoute, engine: ServedEngine) -> EngineRoute:
        return EngineRoute(route.checkpoint_id, route.identity, route.model, engine)

    def _adapter_fields(self, route: EngineRoute) -> dict[str, Any]:
        """What a ``/completion`` request adds to choose ``route``'s adapter on a shared
        server."""
        lora = self._engine(route).lora(route.checkpoint_id)
        return {} if lora is None else {"lora": lora}

    @property
    def current(self) -> EngineRoute:
        return self._current

    @property
    def current_id(self) -> str:
        return self._current.checkpoint_id

    def models(self) -> list[str]:
        with self._lock:
            return [self._current.checkpoint_id, *self._pinned]

    def target(self, checkpoint: str, model: str = "") -> EngineRoute:
        """The route that serves a request now, with a lease on its server taken under the
        same lock as a switch: a server is never stopped under a request bound to it."""
        with self._lock:
            route = self._current if checkpoint == CURRENT else self._pinned[checkpoint]
            route.engine.lease()
            return route

    def _rebalance(self) -> None:
        """Give each server in use its share of the gateway's threads again (see the module),
        one server at a time; a server that cannot be started again keeps serving as it was.
        Servers shared by several checkpoints (``share_base``) already hold every thread."""
        if self._fleet.settings.share_base:
            return
        with self._lock:
            routes = [self._current, *self._pinned.values()]
            engines = list({id(r.engine): r.engine for r in routes}.values())
        share = threads_per_server(self._fleet.budget, len(engines))
        for engine in engines:
            if engine.server.config.threads == share:
                continue
            try:
                fresh = self._fleet.restart_with(engine, share)
            except Exception as exc:  # noqa: BLE001 - logged; it goes on serving as it was
                log.error("serving: %s kept its %d threads: %s", engine.checkpoint_id,
                          engine.server.config.threads, exc)  # fmt: skip
                continue
            with self._lock:
                if self._current.engine is engine:
                    self._current = self._moved(self._current, fresh)
                for cid, route in self._pinned.items():
                    if route.engine is engine:
                        self._pinned[cid] = self._moved(route, fresh)
            self._fleet.retire(engine)

    def _in_use(self, engine: ServedEngine) -> bool:
        """Whether a route still binds new requests to ``engine`` (call under the lock)."""
        routes = [self._current, *self._pinned.values()]
        return any(isinstance(r, EngineRoute) and r.engine is engine for r in routes)

    def take_up(self, info: CheckpointInfo) -> bool:
        if not moves_forward(info, self._current_info):
            return False
        with self._lock:
            keep = set(self._pinned)
        route = self._route_for(info, keep)
        with self._lock:
            old = self._current
            self._current, self._current_info = route, info
            self.switches += 1
            retire = isinstance(old, EngineRoute) and not self._in_use(old.engine)
        log.info(
            "serving: switched llama.cpp from %s to %s (%s weights)",
            old.checkpoint_id,
            info.checkpoint_id,
            info.weights.kind,
        )
        if retire:
            assert isinstance(old, EngineRoute)
            self._fleet.retire(old.engine)
        self._rebalance()
        return True

    def pin(self, info: CheckpointInfo) -> None:
        with self._lock:
            keep = {self._current.checkpoint_id, *self._pinned}
        route = self._route_for(info, keep)
        with self._lock:
            self._pinned[info.checkpoint_id] = route
        self._rebalance()

    def unpin(self, checkpoint_id: str) -> None:
        with self._lock:
            route = self._pinned.pop(checkpoint_id, None)
            retire = isinstance(route, EngineRoute) and not self._in_use(route.engine)
        if retire:
            assert isinstance(route, EngineRoute)
            self._fleet.retire(route.engine)
        self._rebalance()

    def tool_call_constraint(
        self, tools: Sequence[Mapping[str, Any]], tool_choice: Any, parallel: bool = True
    ) -> Constraint | None:
        """The grammar ``tool_choice`` asks for, in GBNF (what llama-server reads)."""
        return gbnf_tool_call_constraint(tools, tool_choice, parallel, self._schema_converter)

    async def chat(self, asked: BackendRequest[EngineRoute, ChatCompletionRequest]) -> Generation:
        try:
            return await self._again_if_revived(lambda: self._native.chat(asked), asked.target)
        finally:
            await self._release(asked.target)

    async def complete(self, asked: BackendRequest[EngineRoute, CompletionRequest]) -> Generation:
        try:
            return await self._again_if_revived(lambda: self._native.complete(asked), asked.target)
        finally:
            await self._release(asked.target)

    async def _again_if_revived(self, ask: Callable[[], Awaitable[Generation]],
                                route: EngineRoute) -> Generation:  # fmt: skip
        """``ask()``, and once more if it failed because the server it was asked of died (and
        was started again, by the fleet's watchdog or here). Nothing of the failed answer
        reached the client (the gateway sends an answer only once it is whole), so the request
        is answered as if the server had never died, and recorded once."""
        engine = route.engine
        server = engine.server  # before the connections: a restart between is seen as one
        await self._fresh_connections(engine)
        try:
            return await ask()
        except UpstreamError as exc:
            # unreachable (our 502), and its process gone: a dying process closes its sockets
            # before it can be waited for, so it is given a moment
            if exc.status != 502 or not await asyncio.to_thread(_exited, server.proc):
                raise
            timeout_s = self._fleet.settings.start_timeout_s
            for _ in range(3):  # a start that failed (its port not yet free) is tried again
                if await asyncio.to_thread(engine.revive, timeout_s):
                    break
            else:
                raise
        await self._fresh_connections(engine)
        log.warning("serving: a request to %s asked again after its server was restarted",
                    route.checkpoint_id)  # fmt: skip
        return await ask()

    async def _fresh_connections(self, engine: ServedEngine) -> None:
        """Drop the connections to a server started again since they were made (they were
        to the dead process); once a restart."""
        if self._forgotten.get(engine.url, 0) < engine.restarts:
            self._forgotten[engine.url] = engine.restarts
            await self._http.forget(engine.url)

    async def _release(self, route: EngineRoute) -> None:
        """Give the request's lease back; the last one of a replaced server also closes the
        connections to it."""
        engine = route.engine
        if engine.release() == 0 and engine.retired:
            await self._http.forget(engine.url)

    def ready(self) -> bool:
        return True

    def running(self) -> list[str]:
        return self._fleet.running()

    def engine_restarts(self) -> int:
        return self._fleet.restarts()

    def stop_engines(self) -> None:
        """Stop every server (the gateway has answered what it admitted); again: nothing."""
        self._fleet.close()

    async def close(self) -> None:
        await self._http.close()
        self.stop_engines()


def _exited(proc: subprocess.Popen[bytes], grace_s: float = 2.0) -> bool:
    """Whether ``proc`` has exited, or does within ``grace_s``."""
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def _url_of(route: EngineRoute) -> str:
    """The server of ``route``: its own (the backend has no single upstream)."""
    return route.engine.url
