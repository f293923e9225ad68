"""How ``rtrl serve --engine llama.cpp`` runs its llama-server processes (``llamacpp.fleet``),
each description the help of its ``--engine-*`` option (``llamacpp.cli``).

A module apart from the fleet, which imports the servers' HTTP client and the converters, so
that building the ``rtrl`` command line loads neither.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

OUTTYPES = ("f32", "f16", "bf16", "q8_0")  # what a full-weights checkpoint is converted to
OUTTYPE = "f16"


class EngineSettings(BaseModel):
    """How ``rtrl serve --engine llama.cpp`` runs its servers."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    binary: Path  # the built llama-server
    cache_root: Path  # the llama.cpp tree (its converters) is under it
    converted_dir: Path | None = Field(
        None,
        description="where converted GGUF files are kept (default: the cache's "
        "llama.cpp/<version>/converted)",
    )
    log_dir: Path  # each server's output
    threads: int = Field(
        2,
        ge=1,
        description="CPU threads of all the gateway's servers together, divided among the "
        "checkpoints served at start (the followed one and the split's arms), since servers that "
        "each take every core fight over them",
    )
    slots: int = Field(8, ge=1, description="requests one server decodes together")
    context: int = Field(8192, ge=256, description="tokens of context, shared by the slots")
    outtype: str = Field(
        OUTTYPE,
        pattern="^(" + "|".join(OUTTYPES) + ")$",
        description="the type a full-weights checkpoint is converted to",
    )
    exact: bool = Field(
        False,
        description="serve a quantized GGUF base as the learner computes it, its dequantized "
        "weights converted once to the outtype (llamacpp.convert.dequantized_base), so that the "
        "engine's log-probabilities are the learner's (SmolLM2's Q4_1 file: 0.004 nats a token "
        "apart as it is, 1e-5 at f16), for a larger file",
    )
    share_base: bool = Field(
        False,
        description="serve the LoRA checkpoints of one base (the followed one, an A/B's arms, a "
        "canary) from one server, each request choosing its adapter, instead of a server each: "
        "one model in memory and one start, but llama.cpp batches no requests of different "
        "adapters together (2 arms on 2 cores: 89 tokens/s against 163 for a server each, "
        "bench/RESULTS.md)",
    )
    start_timeout_s: float = Field(120, gt=0)
    convert_timeout_s: float = Field(1800, gt=0)
    drain_timeout_s: float = Field(
        600,
        gt=0,
        description="longest wait for a replaced server's admitted requests before it is stopped",
    )
