"""The checkpoint registry: every checkpoint the trainer produced, promoted or not, on disk.

One directory per checkpoint, ``<root>/<checkpoint_id>/`` with ``weights.safetensors`` and
``checkpoint.json`` (a :class:`CheckpointInfo`). A checkpoint id names one set of weights forever:
the serving side tags every rollout with it and the warehouse builds batches by it, so an id is
never reused and the weights carry their sha256, checked before every load.

A checkpoint appears whole or not at all: it is written into ``<root>/.tmp-<id>-<hex>/``, synced
to disk, and renamed into place. A crash leaves only such a hidden directory, which listing
ignores and the next ``register`` of that id removes. Rejected candidates are kept too: why a
candidate failed the eval gate is worth as much as what passed it.
"""

from __future__ import annotations

import builtins
import hashlib
import math
import os
import re
import shutil
import uuid
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import orjson
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from infra.durable import fsync_dir
from ingest.contract import ContractError, normalize_ts, now_ts
from trainer.policy import Policy, PolicyConfig

PROMOTED = "promoted"
REJECTED = "rejected"
STATUSES = (PROMOTED, REJECTED)
WEIGHTS_FILE = "weights.safetensors"
INFO_FILE = "checkpoint.json"
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TMP_PREFIX = ".tmp-"
_TMP_DIR = re.compile(r"\.tmp-(?P<id>.+)-[0-9a-f]{32}")


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
        raise ValueError(f"{what}: 1 to 128 characters of [A-Za-z0-9_.:-], "
                         f"not starting with '.', got {value!r}")
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
    raise ValueError(f"{where}: JSON values only (object, array, string, number, bool, null), "
                     f"got {type(value).__name__}")


def _check_strings(value: object, what: str) -> None:
    if not isinstance(value, tuple) or not all(isinstance(s, str) and s for s in value):
        raise ValueError(f"{what}: a sequence of non-empty strings, got {value!r}")


@dataclass(frozen=True)
class CheckpointInfo:
    """What the registry and the ``checkpoints`` topic say about one checkpoint."""

    checkpoint_id: str
    parent: str | None  # the checkpoint it was trained from; None for a fresh initialisation
    weights: str  # absolute path of the weights file
    sha256: str  # of the weights file, lower-case hex
    policy: dict[str, int]  # PolicyConfig.to_json_dict(): enough to rebuild the model
    created_at: str  # canonical UTC
    evals: dict[str, Any]  # the eval gate's figures, as JSON values (NaN becomes None)
    batches: tuple[str, ...]  # ids of the batches it was trained on
    status: str  # "promoted" | "rejected"
    reasons: tuple[str, ...]  # why it was rejected; empty when promoted

    def __post_init__(self) -> None:
        check_checkpoint_id(self.checkpoint_id)
        if self.parent is not None:
            check_checkpoint_id(self.parent, "parent")
        if not isinstance(self.weights, str) or not os.path.isabs(self.weights):
            raise ValueError(f"weights: an absolute path, got {self.weights!r}")
        if not isinstance(self.sha256, str) or _SHA256.fullmatch(self.sha256) is None:
            raise ValueError(f"sha256: 64 lower-case hex digits, got {self.sha256!r}")
        if not isinstance(self.policy, dict):
            raise ValueError(f"policy: an object, got {self.policy!r}")
        try:
            complete = PolicyConfig.from_json_dict(self.policy).to_json_dict() == self.policy
        except (TypeError, ValueError) as exc:
            raise ValueError(f"policy: {exc}") from None
        if not complete:
            raise ValueError(f"policy: every PolicyConfig field is required, got {self.policy!r}")
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
        if self.status == PROMOTED and self.reasons:
            raise ValueError("reasons: a promoted checkpoint has none")
        if self.status == REJECTED and not self.reasons:
            raise ValueError("reasons: a rejected checkpoint says why (at least one reason)")

    def to_json_dict(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "parent": self.parent,
                "weights": self.weights, "sha256": self.sha256, "policy": dict(self.policy),
                "created_at": self.created_at, "evals": self.evals,
                "batches": list(self.batches), "status": self.status,
                "reasons": list(self.reasons)}

    @classmethod
    def from_json_dict(cls, data: Any) -> CheckpointInfo:
        """Parse strictly: every field, nothing else.

        >>> info = CheckpointInfo("c2", "c1", "/w", "0" * 64, PolicyConfig().to_json_dict(),
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
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            missing, unknown = sorted(names - set(data)), sorted(set(data) - names)
            raise ValueError(f"CheckpointInfo: missing fields {missing}, unknown fields {unknown}")
        for name in ("batches", "reasons"):
            if not isinstance(data[name], list):
                raise ValueError(f"{name}: a list, got {data[name]!r}")
        return cls(**{**data, "batches": tuple(data["batches"]),
                      "reasons": tuple(data["reasons"])})


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


class CheckpointRegistry:
    """Checkpoints under one directory; see the module docstring for the layout."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def _dir(self, checkpoint_id: str) -> Path:
        return self.root / check_checkpoint_id(checkpoint_id)

    def register(self, policy: Policy, *, checkpoint_id: str, parent: str | None,
                 evals: dict[str, Any], batches: tuple[str, ...] | list[str], status: str,
                 reasons: tuple[str, ...] | list[str] = ()) -> CheckpointInfo:
        """Store the policy's weights under a new id, atomically; returns what was recorded."""
        final = self._dir(checkpoint_id)
        if final.exists():
            raise ValueError(f"checkpoint {checkpoint_id!r} is registered already: an id names "
                             "one set of weights forever, register under a new id")
        if parent is not None and not (self._dir(parent) / INFO_FILE).is_file():
            raise ValueError(f"parent {parent!r} of {checkpoint_id!r} is not registered")
        tensors = {k: v.detach().cpu().contiguous() for k, v in policy.state_dict().items()}
        data = save_tensors(tensors)
        info = CheckpointInfo(checkpoint_id, parent, str(final / WEIGHTS_FILE),
                              hashlib.sha256(data).hexdigest(), policy.config.to_json_dict(),
                              now_ts(), evals, tuple(batches), status, tuple(reasons))
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_leftovers(checkpoint_id)
        tmp = self.root / f"{_TMP_PREFIX}{checkpoint_id}-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            _write_synced(tmp / WEIGHTS_FILE, data)
            info_json = orjson.dumps(info.to_json_dict(), option=orjson.OPT_INDENT_2)
            _write_synced(tmp / INFO_FILE, info_json)
            fsync_dir(tmp)
            try:
                os.rename(tmp, final)
            except OSError as exc:  # another writer registered the id meanwhile
                raise ValueError(f"checkpoint {checkpoint_id!r} is registered already "
                                 f"({exc.strerror})") from None
            fsync_dir(self.root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        return info

    def _remove_leftovers(self, checkpoint_id: str) -> None:
        """Temp directories of this id that a crashed ``register`` left behind."""
        for path in self.root.glob(f"{_TMP_PREFIX}*"):
            match = _TMP_DIR.fullmatch(path.name)
            if match and match["id"] == checkpoint_id and path.is_dir():
                shutil.rmtree(path)

    def get(self, checkpoint_id: str) -> CheckpointInfo:
        path = self._dir(checkpoint_id) / INFO_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise KeyError(f"no checkpoint {checkpoint_id!r} in the registry at {self.root}"
                           ) from None
        try:
            info = CheckpointInfo.from_json_dict(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None
        if info.checkpoint_id != checkpoint_id:
            raise ValueError(f"{path} describes {info.checkpoint_id!r}, not {checkpoint_id!r}")
        return info

    def load(self, checkpoint_id: str) -> Policy:
        """The policy as registered; the weights' sha256 is checked before they are used."""
        info = self.get(checkpoint_id)
        path = self._dir(checkpoint_id) / WEIGHTS_FILE
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != info.sha256:
            raise ValueError(f"{path}: sha256 {digest} differs from the registered "
                             f"{info.sha256}: the weights file was changed or damaged")
        policy = Policy(PolicyConfig.from_json_dict(info.policy))
        policy.load_state_dict(load_tensors(data), strict=True)
        return policy

    def list(self) -> list[CheckpointInfo]:
        """Every registered checkpoint, oldest first (by ``created_at``, then id)."""
        if not self.root.is_dir():
            return []
        infos = [self.get(path.name) for path in self.root.iterdir()
                 if not path.name.startswith(".") and (path / INFO_FILE).is_file()]
        return sorted(infos, key=lambda info: (info.created_at, info.checkpoint_id))

    def current(self) -> CheckpointInfo | None:
        """The latest promoted checkpoint: what serving should run; None before the first."""
        promoted = [info for info in self.list() if info.status == PROMOTED]
        return promoted[-1] if promoted else None

    def lineage(self, checkpoint_id: str) -> builtins.list[str]:
        """The id, its parent, its parent's parent, ... up to the root checkpoint."""
        chain = [checkpoint_id]
        parent = self.get(checkpoint_id).parent
        while parent is not None:
            if parent in chain:  # only a hand-edited registry can loop
                raise ValueError(f"checkpoint lineage loops: {chain + [parent]}")
            chain.append(parent)
            parent = self.get(parent).parent
        return chain
