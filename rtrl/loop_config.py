"""One configuration for every service of the loop: a TOML file (``rtrl --config rtrl.toml
<command>``, or ``$RTRL_CONFIG``) whose settings become the defaults of the options that name
them, in every command that has one; an option given on the command line still wins.

Why one file: the services must agree. The batch builder's settle time must outlast the reward
windows the stream worker closes interactions with, the trainer's evidence must be the gate's,
and the gateway's and the trainer's engine threads share one machine's cores. Set apart, each
drifts; here a setting that cannot work is refused when any service starts, with the reason.

>>> config = LoopConfig.model_validate({"reward": {"late_s": 60, "grace_s": 5}})
>>> config.settle_s, config.by_flag()["--settle-s"]
(65, 65)
>>> try:
...     LoopConfig.model_validate({"reward": {"late_s": 60}, "batches": {"settle_s": 30}})
... except ValueError as exc:
...     print(exc.errors()[0]["msg"])  # doctest: +ELLIPSIS
Value error, [batches] settle_s 30 is shorter than the reward's late_s + grace_s (65): ...
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewards.config import RewardConfig

ENV = "RTRL_CONFIG"
_STRICT = ConfigDict(frozen=True, extra="forbid")


class KafkaSection(BaseModel):
    model_config = _STRICT
    bootstrap: str | None = Field(None, description="Kafka bootstrap servers")
    topic_prefix: str | None = Field(None, description="prefix of every topic name")


class PathsSection(BaseModel):
    model_config = _STRICT
    warehouse: str | None = Field(None, description="the warehouse folder or URL")
    catalog: str | None = Field(None, description="the warehouse's DuckDB catalog file")
    registry: str | None = Field(None, description="the checkpoint registry folder")
    key_db: str | None = Field(None, description="the SQLite file of hashed API keys")


class BatchesSection(BaseModel):
    model_config = _STRICT
    min_rows: int | None = Field(None, ge=1, description="smallest batch worth building")
    settle_s: int | None = Field(
        None, ge=0, description="only interactions closed this long ago (default: the reward's "
        "late_s + grace_s; refused when shorter)"
    )  # fmt: skip


class TrainerSection(BaseModel):
    model_config = _STRICT
    gate_min_examples: int | None = Field(
        None, ge=1, description="held-out runs with a reward a round waits for, and the gate needs"
    )
    gate_min_users: int | None = Field(
        None, ge=1, description="held-out users a round waits for, and the gate needs"
    )
    eval_engine_threads: int | None = Field(
        None, ge=1, description="CPU threads of the trainer's eval llama-server"
    )
    train_window: int | None = Field(
        None, ge=0, description="attempts' worth of new batches a retry trains on (0: all)"
    )
    evidence_depth: int | None = Field(
        None, ge=0, description="checkpoints back along a line whose held-out users also judge "
        "a candidate, both arms off-policy (0: the parent's own rounds only)"
    )  # fmt: skip


class ServingSection(BaseModel):
    model_config = _STRICT
    engine_threads: int | None = Field(
        None, ge=1, description="CPU threads of all the gateway's llama-servers together"
    )
    slot_wait_s: float | None = Field(
        None, ge=0, description="how long a request waits for a llama-server slot before it is "
        "refused as overloaded (0: as long as it takes)"
    )  # fmt: skip
    answer_deadline_s: float | None = Field(
        None, ge=0, description="a request not answered within this many seconds is refused "
        "(504) and its generation cancelled; under your clients' timeout (0: none)"
    )  # fmt: skip


class LoopConfig(BaseModel):
    """The file's tables: ``[kafka]``, ``[paths]``, ``[reward]`` (reward spec v1's numbers and
    windows: ``rewards.config.RewardConfig``), ``[monitors]`` (the reward-hacking monitors'
    thresholds, as ``--thresholds`` reads them), ``[batches]``, ``[trainer]``, ``[serving]``.
    Every setting is optional: one left out keeps each command's own default."""

    model_config = _STRICT
    kafka: KafkaSection = KafkaSection()
    paths: PathsSection = PathsSection()
    reward: RewardConfig | None = None
    # validated by ``load_loop_config`` as ``rewards.monitors.MonitorThresholds``: not imported
    # here, since every `rtrl` command reads this module and that one loads polars
    monitors: dict[str, Any] | None = None
    batches: BatchesSection = BatchesSection()
    trainer: TrainerSection = TrainerSection()
    serving: ServingSection = ServingSection()

    @property
    def settle_s(self) -> int:
        """The batch builder's settle time: as set, else the reward's late window and grace."""
        if self.batches.settle_s is not None:
            return self.batches.settle_s
        reward = self.reward or RewardConfig()
        return reward.late_s + reward.grace_s

    @model_validator(mode="after")
    def _settle_outlasts_the_late_window(self) -> LoopConfig:
        reward = self.reward or RewardConfig()
        needed = reward.late_s + reward.grace_s
        if self.batches.settle_s is not None and self.batches.settle_s < needed:
            raise ValueError(
                f"[batches] settle_s {self.batches.settle_s} is shorter than the reward's "
                f"late_s + grace_s ({needed}): a batch would take records the late outcomes "
                "still change"
            )
        return self

    def by_flag(self, source: Path | None = None) -> dict[str, Any]:
        """Each set value under the option that takes it, in every command that has it; the
        file the configuration was read from (``source``) as the reward configuration and the
        monitors' thresholds, where it has those tables."""
        out: dict[str, Any] = {
            "--bootstrap": self.kafka.bootstrap,
            "--topic-prefix": self.kafka.topic_prefix,
            "--warehouse": self.paths.warehouse,
            "--catalog": self.paths.catalog,
            "--registry": self.paths.registry,
            "--key-db": self.paths.key_db,
            "--min-rows": self.batches.min_rows,
            "--settle-s": self.settle_s,
            "--gate-min-examples": self.trainer.gate_min_examples,
            "--gate-min-users": self.trainer.gate_min_users,
            "--eval-engine-threads": self.trainer.eval_engine_threads,
            "--train-window": self.trainer.train_window,
            "--evidence-depth": self.trainer.evidence_depth,
            "--engine-threads": self.serving.engine_threads,
            "--slot-wait-s": self.serving.slot_wait_s,
            "--answer-deadline-s": self.serving.answer_deadline_s,
        }
        if source is not None:  # the file's own tables, read where a file is named
            out["--reward-config"] = source if self.reward is not None else None
            out["--thresholds"] = source if self.monitors is not None else None
        return {flag: value for flag, value in out.items() if value is not None}

    def warnings(self, cores: int | None = None) -> list[str]:
        """What may work but hurts: engine threads that oversubscribe this machine's cores
        when the gateway and the trainer share it."""
        cores = cores or os.cpu_count() or 1
        serve, evals = self.serving.engine_threads, self.trainer.eval_engine_threads
        if serve is not None and evals is not None and serve + evals > cores:
            return [f"[serving] engine_threads {serve} and [trainer] eval_engine_threads "
                    f"{evals} make {serve + evals} threads on {cores} cores: where the gateway "
                    "and the trainer share a machine they slow each other"]  # fmt: skip
        return []


def load_loop_config(path: str | Path) -> LoopConfig:
    """The configuration in the TOML file at ``path``, validated (a ValidationError says which
    setting cannot work, and why)."""
    with Path(path).open("rb") as f:
        config = LoopConfig.model_validate(tomllib.load(f))
    if config.monitors is not None:
        from rewards.monitors import MonitorThresholds

        MonitorThresholds.model_validate(config.monitors)  # refused at start, as any setting
    return config
