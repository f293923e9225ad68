"""``rtrl serve --engine llama.cpp``: the settings of the llama-server processes the gateway
starts and switches (``llamacpp.fleet``, ``serving.llamacpp_switch``).

The server binary is built into the cache the first time (``llamacpp.build``); the
checkpoint served first, and each one promoted after it, is converted to GGUF when it is not a
GGUF base already (``llamacpp.convert``, cached).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from infra.kafka_dist import default_cache_root
from llamacpp.build import engine_dir, ensure_server
from llamacpp.convert import OUTTYPE
from llamacpp.fleet import EngineSettings

log = logging.getLogger(__name__)


def engine_settings(
    threads: int,
    slots: int,
    outtype: str = OUTTYPE,
    drain_s: float = 60.0,
    gguf_dir: Path | None = None,
    exact: bool = False,
) -> EngineSettings:
    cache = default_cache_root(os.environ)
    binary = ensure_server(cache, log=lambda line: log.info("%s", line))
    return EngineSettings(
        binary=binary,
        cache_root=cache,
        log_dir=engine_dir(cache) / "logs",
        threads=threads,
        slots=slots,
        outtype=outtype,
        drain_timeout_s=drain_s,
        converted_dir=gguf_dir,
        exact=exact,
    )
