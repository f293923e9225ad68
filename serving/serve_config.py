"""What ``rtrl serve`` runs with: the gateway's settings, each field's help that of its option
(``serving.cli`` derives one option per field, ``infra.settings_cli``).

A module apart from ``serving.server``, which imports the web server, so that building the
``rtrl`` command line (``rtrl --help``, every stage's process) loads no web framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from serving.backends.upstream_protocol import UpstreamTools
from serving.completions import GatewayConfig

if TYPE_CHECKING:
    from llamacpp.engine_settings import EngineSettings
    from serving.routing import Split

UPSTREAM_KEY_ENV = "RTRL_UPSTREAM_API_KEY"  # the upstream's API key: read by serving.cli only
UpstreamKind = Literal["auto", "openai", "llama.cpp"]
SLOT_WAIT_S = 60.0


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class ServeConfig:
    registry: Path = field(metadata=_help("checkpoint registry folder"))
    # None: the registry's latest promoted checkpoint
    checkpoint: str | None = field(
        metadata=_help(
            "checkpoint to serve first (default: the latest promoted); with --upstream, the one "
            "the upstream serves now"
        )
    )
    key_db: Path = field(metadata=_help("SQLite file of hashed API keys"))
    bootstrap: str
    topic_prefix: str = ""
    host: str = field(default="127.0.0.1", metadata=_help("bind address"))
    port: int = field(default=8000, metadata=_help("TCP port"))
    metrics_port: int | None = field(
        default=None,
        metadata=_help("serve Prometheus metrics on this port (/metrics); default: none"),
    )
    upstream: str | None = field(  # an OpenAI-compatible server's base URL (without /v1)
        default=None,
        metadata=_help(
            "serve through this OpenAI-compatible server (vLLM, SGLang, another rtrl serve) "
            f"instead of a local model; its API key from ${UPSTREAM_KEY_ENV}. vLLM must run with "
            "--logprobs-mode processed_logprobs (its default, raw_logprobs, gives "
            "log-probabilities from before temperature and top-p: `rtrl train` quarantines such "
            "batches). Sampling parameters a rollout does not record (top_k, min_p, penalties, "
            "logit_bias, ...) are refused with a 400"
        ),
    )
    upstream_model: str | None = field(  # its base model's name; None: the first it lists
        default=None,
        metadata=_help(
            "the name the upstream serves its base model under (default: the first of its "
            "/v1/models)"
        ),
    )
    upstream_api_key: str | None = None
    upstream_kind: UpstreamKind = field(  # asked of the upstream when auto
        default="auto",
        metadata=_help(
            "how to ask the upstream for exact token ids: openai (vLLM's return_token_ids), "
            "llama.cpp (its native endpoints), or auto (default: llama.cpp when GET /props "
            "answers as llama-server does at start)"
        ),
    )
    upstream_tools: UpstreamTools = field(
        default="pass",
        metadata=_help(
            "how an OpenAI-compatible upstream gets a request's tools: pass (default: as they "
            "are, for its model's own chat template and tool parser; vLLM needs "
            "--enable-auto-tool-choice and --tool-call-parser; rollouts of required or named "
            "tool_choice are refused, the upstream's constraint not being recorded) or render "
            "(in the gateway's default tool format, for a model whose template has no tools; "
            "required and named are refused with a 400)"
        ),
    )
    slot_wait_s: float = field(
        default=SLOT_WAIT_S,
        metadata=_help(
            "llama.cpp (--engine llama.cpp, or a llama-server upstream): how long a request "
            "waits for a free slot of its server before it is refused with a 503 `overloaded` "
            f"and Retry-After (0: as long as it takes). Keep it under your clients' timeout less "
            f"an answer's decode time: a request that waits past the client's timeout fails with "
            f"no reason given (default {SLOT_WAIT_S:g})"
        ),
    )
    engine: EngineSettings | None = None  # llama-server processes started and switched here
    adapter_dir: Path = field(
        default=Path(".rtrl/adapters"),
        metadata=_help(
            "where LoRA checkpoints are written as peft adapters for the upstream to load (a "
            "path the upstream can read)"
        ),
    )
    split: Split | None = None
    split_org: str | None = None  # the one organisation the split applies to (None: every one)
    device: str = field(default="cpu", metadata=_help("local backend: torch device (cpu, cuda)"))
    max_batch: int = field(
        default=16, metadata=_help("local backend: most requests sampled together")
    )
    batch_wait_s: float = 0.0  # on the command line in milliseconds (serving.cli)
    spool_max: int = field(
        default=100_000,
        metadata=_help(
            "rollouts held while Kafka is unreachable; beyond, each is dropped (counted and logged)"
        ),
    )
    spool_max_bytes: int = field(
        default=256 << 20,
        metadata=_help(
            "bytes of rollouts held while Kafka is unreachable (in memory, and in --spool-dir "
            "when given); beyond, each is dropped (counted and logged)"
        ),
    )
    spool_dir: Path | None = field(
        default=None,
        metadata=_help(
            "keep every rollout here (a folder per topic) until Kafka acknowledged it, so that "
            "one whose gateway is killed while Kafka is down is delivered by the next start "
            "(at least once); one gateway per folder. Default: none, the spool is memory only "
            "and dies with the process"
        ),
    )
    spool_fsync: bool = field(  # its option: --no-spool-fsync
        default=True,
        metadata=_help(
            "do not fsync the disk spool's writes: a killed gateway still loses nothing (the "
            "kernel has the bytes), a machine that loses power may lose the last writes"
        ),
    )
    drain_s: float = 10.0
    record: bool = field(  # its option: --no-record
        default=True,
        metadata=_help("record no rollouts (a backend standing as another gateway's upstream)"),
    )
    follow: bool = field(  # its option: --no-follow
        default=True,
        metadata=_help(
            "do not follow the checkpoints topic (a backend standing as another gateway's "
            "upstream: that gateway loads what it serves)"
        ),
    )
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    seed: int = field(default=0, metadata=_help("local backend: sampling seed"))

    def __post_init__(self) -> None:
        if not self.slot_wait_s >= 0:
            raise ValueError(f"slot_wait_s must be >= 0, got {self.slot_wait_s!r}")

    @property
    def slot_wait(self) -> float | None:
        """The slot wait as the backends take it: None waits as long as it takes."""
        return self.slot_wait_s or None
