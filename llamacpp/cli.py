"""``rtrl serve --engine llama.cpp``: the settings of the llama-server processes the gateway
starts and switches (``llamacpp.fleet``, ``serving.backends.llamacpp_engine``), and their
``--engine-*`` options, one per field of :class:`EngineSettings` (``infra.settings_cli``).

The server binary is built into the cache the first time (``llamacpp.build``, imported then);
the checkpoint served first, and each one promoted after it, is converted to GGUF when it is not
a GGUF base already (``llamacpp.convert``, cached).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from infra.cli import positive_int
from infra.kafka_dist import default_cache_root
from infra.settings_cli import Option, SettingsOptions
from llamacpp.engine_settings import OUTTYPE, OUTTYPES, EngineSettings

log = logging.getLogger(__name__)

# The options' spellings users know: --engine-gguf-dir and --engine-drain-s name fields that
# came later; the server's own files and its timeouts are not options.
ENGINE_OPTIONS = SettingsOptions(
    EngineSettings,
    prefix="engine_",
    help_prefix="llama.cpp: ",
    options={
        "converted_dir": Option(flags=("--engine-gguf-dir",)),
        "threads": Option(type=positive_int),
        "slots": Option(type=positive_int),
        "outtype": Option(choices=OUTTYPES),
        "drain_timeout_s": Option(flags=("--engine-drain-s",)),
    },
    omit=("binary", "cache_root", "log_dir", "context", "start_timeout_s", "convert_timeout_s"),
)


def add_engine_args(p: argparse.ArgumentParser) -> None:
    ENGINE_OPTIONS.add_to(p)


def engine_settings_from(args: argparse.Namespace) -> EngineSettings:
    """The settings the ``--engine-*`` options say, on the server built here (the first time)."""
    return ENGINE_OPTIONS.read(args, **_built_server())


def engine_settings(
    threads: int,
    slots: int,
    outtype: str = OUTTYPE,
    drain_s: float = 60.0,
    gguf_dir: Path | None = None,
    exact: bool = False,
) -> EngineSettings:
    return EngineSettings(
        **_built_server(),
        threads=threads,
        slots=slots,
        outtype=outtype,
        drain_timeout_s=drain_s,
        converted_dir=gguf_dir,
        exact=exact,
    )


def _built_server() -> dict[str, Path]:
    """The built llama-server, the cache it is in and where its servers write their output."""
    from llamacpp.build import engine_dir, ensure_server

    cache = default_cache_root(os.environ)
    binary = ensure_server(cache, log=lambda line: log.info("%s", line))
    return {"binary": binary, "cache_root": cache, "log_dir": engine_dir(cache) / "logs"}
