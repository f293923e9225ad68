"""Assemble and run ``rtrl serve``: key store, backend, recorder, checkpoint follower, app, under
uvicorn.

Stopping (SIGTERM, SIGINT) lets uvicorn finish the requests in flight, then stops following,
answers what the batcher still holds, and gives the spool ``drain_s`` to reach Kafka; whatever it
could not deliver by then is counted and logged as dropped.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import uvicorn

from checkpoints.store import CheckpointRegistry
from infra.api_keys import KeyStore
from infra.http_server import freeze_startup_heap, http_server
from infra.lifetime import stop_signals_call
from infra.topics import TopicNames
from serving.api import create_app
from serving.assignment import Assignment
from serving.backends.base import Backend
from serving.follower import CheckpointFollower
from serving.metrics import GatewayMetrics
from serving.rollouts.recorder import RolloutRecorder
from serving.rollouts.spool import RolloutSpool
from serving.serve_config import ServeConfig

log = logging.getLogger("serving")


def _first_model(url: str, api_key: str | None) -> str:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    answer = httpx.get(f"{url.rstrip('/')}/v1/models", headers=headers, timeout=30)
    answer.raise_for_status()
    return str(answer.json()["data"][0]["id"])


def build_backend(config: ServeConfig, registry: CheckpointRegistry) -> Backend:
    checkpoint = config.checkpoint
    if checkpoint is None:
        current = registry.current()
        if current is None:
            raise ValueError(
                f"no promoted checkpoint in {registry.root}: give --checkpoint or "
                "run `rtrl checkpoints init`"
            )
        checkpoint = current.checkpoint_id
    pinned = config.split.checkpoints() if config.split is not None else set()
    if config.engine is not None:
        from llamacpp.fleet import EngineFleet, servers_for, threads_per_server
        from serving.backends.llamacpp_engine import EngineBackend

        # the followed checkpoint and the split's arms
        kinds = [registry.get(c).weights.kind for c in sorted({checkpoint} | pinned)]
        servers = servers_for(kinds, config.engine.share_base)
        threads = threads_per_server(config.engine.threads, servers)
        log.info(
            "serving: %d llama.cpp server(s) at once, %d thread(s) each, of %d",
            servers,
            threads,
            config.engine.threads,
        )
        fleet = EngineFleet(config.engine.model_copy(update={"threads": threads}), registry,
                            budget=config.engine.threads)  # fmt: skip
        try:
            return EngineBackend(fleet, registry, checkpoint, pinned,
                                 slot_wait_s=config.slot_wait)  # fmt: skip
        except BaseException:
            fleet.close()
            raise
    if config.upstream is not None:
        from serving.backends.llamacpp import backend_class
        from serving.backends.upstream import UpstreamAccess

        model = config.upstream_model or _first_model(config.upstream, config.upstream_api_key)
        kind = backend_class(config.upstream, config.upstream_kind, config.upstream_api_key)
        return kind(
            config.upstream,
            registry,
            checkpoint,
            model,
            config.adapter_dir.resolve(),
            pinned,
            UpstreamAccess(
                config.upstream_api_key, tools=config.upstream_tools, slot_wait_s=config.slot_wait
            ),
        )
    from serving.backends.local import LocalBackend

    return LocalBackend(
        registry,
        checkpoint,
        pinned,
        config.device,
        config.seed,
        config.max_batch,
        config.batch_wait_s,
    )


@dataclass
class Gateway:
    """Everything one ``rtrl serve`` holds, to be closed in order."""

    server: uvicorn.Server
    backend: Backend
    recorder: RolloutRecorder | None
    follower: CheckpointFollower | None
    keys: KeyStore
    metrics_server: object | None

    def close(self, drain_s: float) -> None:
        if self.follower is not None:
            self.follower.close()
        if self.recorder is not None:
            left = self.recorder.close(drain_s)
            if left:
                log.warning("%d rollouts never reached Kafka (dropped, counted)", left)
        if self.metrics_server is not None:
            self.metrics_server.shutdown()  # type: ignore[attr-defined]
        self.keys.close()
        _stop_children(self.backend)


def _stop_children(backend: Backend) -> None:
    """Stop the processes a backend started (llama-server: they run in sessions of their own,
    so nothing else would)."""
    stop = getattr(backend, "stop_engines", None)
    if stop is not None:
        stop()


def build(config: ServeConfig) -> Gateway:
    registry = CheckpointRegistry(config.registry)
    backend = build_backend(config, registry)
    try:
        return _assemble(config, backend)
    except BaseException:
        _stop_children(backend)
        raise


def _assemble(config: ServeConfig, backend: Backend) -> Gateway:
    topics = TopicNames(config.topic_prefix)
    recorder = None
    if config.record:
        spool = (
            RolloutSpool(config.spool_dir / topics.rollouts, config.spool_fsync)
            if config.spool_dir is not None
            else None
        )
        recorder = RolloutRecorder(config.bootstrap, topics.rollouts, config.spool_max,
                                   spool=spool, spool_max_bytes=config.spool_max_bytes)  # fmt: skip
    metrics = GatewayMetrics()
    metrics.watch(
        spooled=lambda: recorder.spooled() if recorder else 0,
        dropped=lambda: dict(recorder.dropped) if recorder else {},
        delivered=lambda: recorder.delivered if recorder else 0,
        switches=lambda: backend.switches,
        not_loaded=lambda: dict(getattr(backend, "not_loaded", {})),
        engine_restarts=lambda: int(getattr(backend, "engine_restarts", lambda: 0)()),
    )
    if recorder is not None:
        metrics.watch_spool(recorder.spooled_bytes, lambda: recorder.write_errors,
                            recorder.spool_counts)  # fmt: skip
    keys = KeyStore(config.key_db)
    assignment = Assignment(backend, config.split, config.split_org)
    app = create_app(backend, recorder, keys, assignment, config.gateway, metrics)
    follower = None
    if config.follow:
        follower = CheckpointFollower(
            config.bootstrap, topics.checkpoints, assignment.on_announcement
        )
        follower.start()
    server = http_server(app, config.host, config.port, timeout_graceful_shutdown=30)
    metrics_server = (
        metrics.serve(config.metrics_port, host=config.host)
        if config.metrics_port is not None
        else None
    )
    return Gateway(server, backend, recorder, follower, keys, metrics_server)


def run(config: ServeConfig) -> int:
    gateway = build(config)
    log.info(
        "rtrl serve on http://%s:%d (%s backend, pid %d), rollouts to %s%s",
        config.host,
        config.port,
        gateway.backend.kind,
        os.getpid(),
        config.bootstrap,
        "" if config.record else " (not recorded)",
    )
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again for the
    # handler it found: a no-op one here, so that the spool still gets its drain before exit.
    with stop_signals_call(lambda _sig, _frame: None):
        try:
            freeze_startup_heap()
            gateway.server.run()
        finally:
            gateway.close(config.drain_s)
    return 0
