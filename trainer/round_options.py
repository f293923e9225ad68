"""What one round of ``rtrl train`` works with, each field's help that of its option
(``trainer.cli`` derives one option per field, ``infra.settings_cli``).

A module apart from ``trainer.service``, which imports torch, so that building the ``rtrl``
command line loads no model library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from infra.topics import TopicNames
from models.lora_settings import LoraSettings
from release.canary_config import CanaryConfig
from release.gate import GateConfig
from trainer.learner_config import LearnerConfig

if TYPE_CHECKING:
    from llamacpp.engine_settings import EngineSettings


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class RoundOptions:
    registry: Path
    warehouse: Path = field(
        metadata=_help("local warehouse folder the batches' files are relative to")
    )
    bootstrap: str
    topics: TopicNames
    learner: LearnerConfig
    gate: GateConfig
    held_out: float = field(default=0.3, metadata=_help("share of interactions kept for the eval"))
    train_window: int = field(
        default=2,
        metadata=_help(
            "attempts' worth of new batches a retry trains on: at 2, the batches no earlier "
            "attempt on the served checkpoint tried and those the last attempt tried first, "
            "so a retry after a rejection does not train on every earlier batch again (a "
            "first attempt trains on all; 0: always all); the gate judges on every batch's "
            "held-out users"
        ),
    )
    evidence_depth: int = field(
        default=0,
        metadata=_help(
            "checkpoints back along the line whose held-out users also judge a candidate: "
            "the parent's parent at 1, and so on (their rewards are not the parent's, so both "
            "the candidate's and the parent's values are estimated off-policy; rows sampled "
            "with full support only); 0: the parent's own rounds only"
        ),
    )
    catalog: Path | None = field(  # default: warehouse.duckdb in the warehouse
        default=None,
        metadata=_help(
            "the warehouse's DuckDB catalog, for the monitors (default: warehouse.duckdb in "
            "--warehouse)"
        ),
    )
    checkpoint: str | None = field(  # default: the current promoted one
        default=None,
        metadata=_help("the checkpoint whose data to train on (default: the current promoted)"),
    )
    candidate_id: str | None = field(  # default: the next number
        default=None,
        metadata=_help("the candidate's id (default: the parent's prefix and the next number)"),
    )
    thresholds: Path | None = field(
        default=None, metadata=_help("monitor thresholds file (default: the built-in ones)")
    )
    publish: bool = False
    device: str = field(  # auto | cpu | cuda
        default="auto",
        metadata=_help("auto: a CUDA GPU when there is one (bf16 autocast), else the CPU"),
    )
    bf16: bool = field(  # autocast on a GPU that has it; its option: --no-bf16
        default=True, metadata=_help("train in float32 on a GPU too")
    )
    lora: LoraSettings | None = None  # train an adapter instead of every weight
    canary: CanaryConfig | None = None  # a candidate that passes serves a share first
    eval_engine: EngineSettings | None = None  # the candidate evals' llama.cpp (None: transformers)
    org: str | None = field(
        default=None,
        metadata=_help(
            "train this organisation's line: only its own users' examples (the gate judges on "
            "its own held-out users), from its line's current checkpoint, else the shared one "
            "(default: the shared line)"
        ),
    )
    own_only: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "organisations whose policy is own-only: their data never trains the shared line "
            "(comma-separated)"
        ),
    )
