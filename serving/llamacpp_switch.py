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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoints.record import CheckpointInfo
from checkpoints.store import CheckpointRegistry
from llamacpp.fleet import EngineFleet, ServedEngine
from models.generation import Generation
from serving.follower import moves_forward
from serving.llamacpp import LlamaCppBackend
from serving.routing import CURRENT
from serving.upstream import Route

log = logging.getLogger("serving")


@dataclass(frozen=True)
class EngineRoute(Route):
    engine: ServedEngine = field(compare=False)


class EngineBackend(LlamaCppBackend):
    kind = "llama.cpp engine"

    def __init__(
        self,
        fleet: EngineFleet,
        registry: CheckpointRegistry,
        checkpoint_id: str,
        pinned: set[str] | frozenset[str] = frozenset(),
        timeout_s: float = 600.0,
    ) -> None:
        self._fleet = fleet
        # the upstream's own URL is never asked: each route names its server
        super().__init__(
            "http://llama-server.invalid",
            registry,
            checkpoint_id,
            "",
            Path("."),
            set(pinned),
            None,
            timeout_s,
        )

    def _served(self, checkpoint_id: str) -> EngineRoute | None:
        """The route of a checkpoint already served (followed or pinned), if any."""
        with self._lock:
            routes = [getattr(self, "_current", None), *getattr(self, "_pinned", {}).values()]
        for route in routes:
            if isinstance(route, EngineRoute) and route.checkpoint_id == checkpoint_id:
                return route
        return None

    def _route_for(self, info: CheckpointInfo) -> Route | None:
        """``info``'s server: the one already serving it, or a new one (slow: conversion and
        start happen here, on the caller's thread, while serving goes on)."""
        served = self._served(info.checkpoint_id)
        if served is not None:
            return served
        engine = self._fleet.start(info)
        return EngineRoute(info.checkpoint_id, info.model.identity(), info.checkpoint_id, engine)

    def _url_of(self, route: Route) -> str:
        assert isinstance(route, EngineRoute)
        return route.engine.url

    def target(self, checkpoint: str, model: str = "") -> Route:
        """The route that serves a request now, with a lease on its server taken under the
        same lock as a switch: a server is never stopped under a request bound to it."""
        with self._lock:
            route = self._current if checkpoint == CURRENT else self._pinned[checkpoint]
            assert isinstance(route, EngineRoute)
            route.engine.lease()
            return route

    def _in_use(self, engine: ServedEngine) -> bool:
        """Whether a route still binds new requests to ``engine`` (call under the lock)."""
        routes = [self._current, *self._pinned.values()]
        return any(isinstance(r, EngineRoute) and r.engine is engine for r in routes)

    def take_up(self, info: CheckpointInfo) -> bool:
        if not moves_forward(info, self._current_info):
            return False
        route = self._route_for(info)
        assert isinstance(route, EngineRoute)
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
        return True

    def pin(self, info: CheckpointInfo) -> None:
        route = self._route_for(info)
        with self._lock:
            self._pinned[info.checkpoint_id] = route  # type: ignore[assignment]

    def unpin(self, checkpoint_id: str) -> None:
        with self._lock:
            route = self._pinned.pop(checkpoint_id, None)
            retire = isinstance(route, EngineRoute) and not self._in_use(route.engine)
        if retire:
            assert isinstance(route, EngineRoute)
            self._fleet.retire(route.engine)

    async def chat(
        self,
        route: Route,
        request: Any,
        raw: dict[str, Any],
        params: Any,
        on_step: Any = None,
        splice: Any = None,
    ) -> Generation:
        try:
            return await super().chat(route, request, raw, params, on_step, splice)
        finally:
            await self._release(route)

    async def complete(
        self, route: Route, request: Any, raw: dict[str, Any], params: Any, on_step: Any = None
    ) -> Generation:
        try:
            return await super().complete(route, request, raw, params, on_step)
        finally:
            await self._release(route)

    async def _release(self, route: Route) -> None:
        """Give the request's lease back; the last one of a replaced server also closes the
        connections to it."""
        assert isinstance(route, EngineRoute)
        engine = route.engine
        if engine.release() == 0 and engine.retired:
            pool = self._pools.pop(engine.url, None)
            if pool is not None:
                await pool.close()

    def running(self) -> list[str]:
        return self._fleet.running()

    def stop_engines(self) -> None:
        """Stop every server (the gateway has answered what it admitted); again: nothing."""
        self._fleet.close()

    async def close(self) -> None:
        await super().close()
        self.stop_engines()
