"""``rtrl serve --engine llama.cpp``: llama-server started on the served checkpoint's GGUF base.

The engine serves what the checkpoint is: a base checkpoint whose base is a ``.gguf`` file (the
one ``rtrl models fetch`` caches, registered with ``rtrl checkpoints init``). The server binary
is built into the cache the first time (``serving.llamacpp_build``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from checkpoints.store import CheckpointRegistry
from infra.kafka_dist import default_cache_root
from infra.ports import free_port_block
from serving.llamacpp_build import engine_dir, ensure_server
from serving.llamacpp_engine import EngineConfig, LlamaServer

log = logging.getLogger("serving")


def engine_model(registry: CheckpointRegistry, checkpoint: str | None) -> tuple[str, Path]:
    """The checkpoint to serve (default: the latest promoted) and its GGUF file."""
    info = registry.get(checkpoint) if checkpoint else registry.current()
    if info is None:
        raise ValueError(f"no promoted checkpoint in {registry.root}: give --checkpoint")
    path = Path(info.model.base_path)
    if info.weights.kind != "base" or path.suffix != ".gguf":
        raise ValueError(
            f"{info.checkpoint_id} is not a GGUF base ({info.weights.kind} weights over "
            f"{path.name}): llama-server serves a .gguf file"
        )
    return info.checkpoint_id, path


def start_engine(registry_root: Path, checkpoint: str | None, threads: int,
                 slots: int) -> LlamaServer:  # fmt: skip
    checkpoint_id, model = engine_model(CheckpointRegistry(registry_root), checkpoint)
    cache = default_cache_root(os.environ)
    binary = ensure_server(cache, log=lambda line: log.info("%s", line))
    logs = engine_dir(cache) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = free_port_block(1)
    config = EngineConfig(binary, model, port, threads, slots, alias=checkpoint_id)
    log.info("serving: llama-server on %s, %s (log %s)", model.name, port, logs)
    return LlamaServer(config, logs / f"llama-server-{port}.log")
