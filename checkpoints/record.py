"""The checkpoint record: what one checkpoint is, where it came from and what the gate said.

A :class:`CheckpointInfo` is the content of ``checkpoint.json`` in a checkpoint's directory (see
``checkpoints.store`` for the layout on disk): its id, its parent, the base model, how its
weights are stored (full weights or a LoRA adapter), how it was trained, its evals and the
gate's decision. Pure: validation and JSON, no file system.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel as PydModel
from pydantic import ConfigDict, Field, ValidationError, model_validator

from ingest.contract import ContractError, normalize_ts
from models.lora_settings import LoraSettings
from models.rollout import ModelIdentity

PROMOTED = "promoted"
REJECTED = "rejected"
CANARY = "canary"  # passed the offline gate; serves a share of traffic beside its parent
STATUSES = (PROMOTED, REJECTED, CANARY)
# the only changes a registered checkpoint's record can go through: a canary's looks at its
# live A/B, then its outcome
TRANSITIONS = {(CANARY, CANARY), (CANARY, PROMOTED), (CANARY, REJECTED)}
WEIGHTS_FILE = "weights.safetensors"
INFO_FILE = "checkpoint.json"
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_checkpoint_id(value: object, what: str = "checkpoint_id") -> str:
    """A checkpoint id: 1 to 128 of ``[A-Za-z0-9_.:-]``, not starting with ``.`` (the registry's
    own hidden directories, and ``.``/``..``, must never be taken for a checkpoint).

    >>> check_checkpoint_id("run-3:step.120")
    'run-3:step.120'
    >>> check_checkpoint_id("../etc")
    Traceback (most recent call last):
    ...
    ValueError: checkpoint_id: 1 to 128 characters of [A-Za-z0-9_.:-], not starting with '.', ...
    """
    if not isinstance(value, str) or _ID.fullmatch(value) is None or value.startswith("."):
        raise ValueError(
            f"{what}: 1 to 128 characters of [A-Za-z0-9_.:-], not starting with '.', got {value!r}"
        )
    return value


def _json_figures(value: Any, where: str) -> Any:
    """A copy of eval figures that survives JSON unchanged: tuples become lists and non-finite
    numbers null (JSON has no NaN: a gate that met one says so in its reasons). Anything that is
    not a JSON value is refused rather than turned into a string.

    >>> _json_figures({"kl": float("nan"), "sizes": (1, 2)}, "evals")
    {'kl': None, 'sizes': [1, 2]}
    """
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"{where}: keys are strings, got {key!r}")
        return {key: _json_figures(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_figures(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    raise ValueError(
        f"{where}: JSON values only (object, array, string, number, bool, null), "
        f"got {type(value).__name__}"
    )


def _check_strings(value: object, what: str) -> None:
    if not isinstance(value, tuple) or not all(isinstance(s, str) and s for s in value):
        raise ValueError(f"{what}: a sequence of non-empty strings, got {value!r}")


class ModelRef(PydModel):
    """The base a checkpoint is built on, named by content."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    family: str  # the config's model_type (llama, qwen2, ...)
    base_path: str  # absolute path of the base (a model directory or a .gguf file)
    base_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tokenizer_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    def identity(self) -> ModelIdentity:
        return ModelIdentity(self.family, self.base_sha256, self.tokenizer_sha256)


class WeightsRef(PydModel):
    """What the checkpoint stores: nothing (``base``: the base itself), every weight
    (``full``), or a LoRA adapter over the base (``lora``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["base", "full", "lora"]
    file: str | None = None  # in the checkpoint's directory
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    lora: LoraSettings | None = None

    @model_validator(mode="after")
    def _consistent(self) -> WeightsRef:
        if (self.kind == "base") != (self.file is None) or (self.file is None) != (
                self.sha256 is None):  # fmt: skip
            raise ValueError(
                "a base checkpoint names no file; full and lora name one with its sha256"
            )
        if (self.kind == "lora") != (self.lora is not None):
            raise ValueError("lora settings come with a lora checkpoint, and only with one")
        return self


class TrainingRef(PydModel):
    """Where training stood: optimizer step, the learner's running state, the file with the
    optimizer's moments and the random generators (absent before any training), and the
    checkpoint the update's KL penalty was taken against (id and the sha256 of its weights;
    absent without a penalty)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    step: int = Field(0, ge=0)
    state: dict[str, float] = Field(default_factory=dict)  # e.g. the running reward baseline
    file: str | None = None
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    reference_id: str | None = None
    reference_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class CheckpointInfo:
    """What the registry and the ``checkpoints`` topic say about one checkpoint."""

    checkpoint_id: str
    parent: str | None  # the checkpoint it was trained from; None for a root
    directory: str  # absolute path of its directory in the registry
    model: ModelRef
    weights: WeightsRef
    training: TrainingRef
    created_at: str  # canonical UTC
    evals: dict[str, Any]  # the eval gate's figures, as JSON values (NaN becomes None)
    batches: tuple[str, ...]  # ids of the batches it was trained on
    status: str  # "promoted" | "rejected" | "canary"
    reasons: tuple[str, ...]  # why it was rejected; empty otherwise
    # the organisation whose line it is (None: the shared line, which every organisation falls
    # back to), and for an organisation's checkpoint the shared checkpoint its line grows on
    org_id: str | None = None
    shared_base: str | None = None

    def __post_init__(self) -> None:
        check_checkpoint_id(self.checkpoint_id)
        if self.parent is not None:
            check_checkpoint_id(self.parent, "parent")
        if self.org_id is not None and not (isinstance(self.org_id, str) and
                                            0 < len(self.org_id) <= 128):  # fmt: skip
            raise ValueError(f"org_id: 1 to 128 characters, got {self.org_id!r}")
        if (self.org_id is None) != (self.shared_base is None):
            raise ValueError("shared_base: an organisation's checkpoint names the shared "
                             "checkpoint its line grows on, and only it")  # fmt: skip
        if self.shared_base is not None:
            check_checkpoint_id(self.shared_base, "shared_base")
        if not isinstance(self.directory, str) or not os.path.isabs(self.directory):
            raise ValueError(f"directory: an absolute path, got {self.directory!r}")
        try:
            for name, kind in (("model", ModelRef), ("weights", WeightsRef),
                               ("training", TrainingRef)):  # fmt: skip
                value = getattr(self, name)
                if isinstance(value, dict):
                    object.__setattr__(self, name, kind.model_validate(value))
                elif not isinstance(value, kind):
                    raise ValueError(f"{name}: a {kind.__name__}, got {value!r}")
        except ValidationError as exc:
            raise ValueError(
                f"{exc.title}: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
            ) from None
        try:
            object.__setattr__(self, "created_at", normalize_ts(self.created_at, "created_at"))
        except ContractError as exc:
            raise ValueError(f"created_at: {exc.detail}") from None
        if not isinstance(self.evals, dict):
            raise ValueError(f"evals: an object, got {self.evals!r}")
        object.__setattr__(self, "evals", _json_figures(self.evals, "evals"))
        _check_strings(self.batches, "batches")
        _check_strings(self.reasons, "reasons")
        if self.status not in STATUSES:
            raise ValueError(f"status: one of {list(STATUSES)}, got {self.status!r}")
        if self.status != REJECTED and self.reasons:
            raise ValueError(f"reasons: a {self.status} checkpoint has none")
        if self.status == REJECTED and not self.reasons:
            raise ValueError("reasons: a rejected checkpoint says why (at least one reason)")

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "parent": self.parent,
            "directory": self.directory,
            "model": self.model.model_dump(mode="json"),
            "weights": self.weights.model_dump(mode="json"),
            "training": self.training.model_dump(mode="json"),
            "created_at": self.created_at,
            "evals": self.evals,
            "batches": list(self.batches),
            "status": self.status,
            "reasons": list(self.reasons),
            "org_id": self.org_id,
            "shared_base": self.shared_base,
        }

    @classmethod
    def from_json_dict(cls, data: Any) -> CheckpointInfo:
        """Parse strictly: every field, nothing else (``org_id`` and ``shared_base`` may be
        absent, as in a record written before organisations had lines: the shared line).

        >>> ref = {"family": "llama", "base_path": "/m", "base_sha256": "0" * 64,
        ...        "tokenizer_sha256": "1" * 64}
        >>> info = CheckpointInfo("c2", "c1", "/r/c2", ref, {"kind": "base"}, {},
        ...                       "2026-11-30T10:00:00Z", {"reward": 0.5}, ("b1",), "promoted", ())
        >>> CheckpointInfo.from_json_dict(info.to_json_dict()) == info
        True
        >>> CheckpointInfo.from_json_dict({**info.to_json_dict(), "step": 3})
        Traceback (most recent call last):
        ...
        ValueError: CheckpointInfo: missing fields [], unknown fields ['step']
        """
        if not isinstance(data, dict):
            raise ValueError(f"CheckpointInfo: a JSON object, got {type(data).__name__}")
        if "policy" in data and "model" not in data:
            raise ValueError(
                "written by an older rtrl whose registry held the GRU token "
                "policy, which no longer exists: start a new registry with "
                "`rtrl checkpoints init --model ...`"
            )
        names = {f.name for f in fields(cls)}
        data = {"org_id": None, "shared_base": None, **data}  # written before lines: shared
        if set(data) != names:
            missing, unknown = sorted(names - set(data)), sorted(set(data) - names)
            raise ValueError(f"CheckpointInfo: missing fields {missing}, unknown fields {unknown}")
        for name in ("batches", "reasons"):
            if not isinstance(data[name], list):
                raise ValueError(f"{name}: a list, got {data[name]!r}")
        return cls(**{**data, "batches": tuple(data["batches"]), "reasons": tuple(data["reasons"])})

    def file(self, name: str) -> Path:
        return Path(self.directory) / name

    def decision(self) -> dict[str, Any]:
        """The gate's decision in one flat object: estimate, bound, ESS, KL, the alarms that
        spoke and the canary's outcome (None where the checkpoint was not gated: a root, a
        rollback)."""
        gate = self.evals.get("gate", {})
        canary = self.evals.get("canary")
        evals_alarms = [t["metric"] for t in self.evals.get("candidate_evals", []) if t["alarm"]]
        return {
            "status": self.status,
            "estimate": gate.get("gain"),
            "bound": gate.get("lower"),
            "level": gate.get("level"),
            "ess": gate.get("ess"),
            "kl": gate.get("kl"),
            "n": gate.get("n"),
            "users": gate.get("users"),
            "attempt": gate.get("attempt"),
            "method": gate.get("method"),
            "monitor_alarms": list(self.evals.get("alarms", [])),
            "candidate_eval_alarms": evals_alarms,
            "canary": None
            if canary is None
            else {k: canary.get(k) for k in ("experiment", "percent", "looks", "outcome")},
            "reasons": list(self.reasons),
        }
