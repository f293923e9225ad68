"""The checkpoint registry: every checkpoint the trainer produced, promoted or not, on disk.

One directory per checkpoint, ``<root>/<checkpoint_id>/`` with ``checkpoint.json`` (a
:class:`CheckpointInfo`) and what the checkpoint stores: nothing for a root that *is* its base
model (named by content hash), ``model.safetensors`` for full weights, ``adapter.safetensors``
for a LoRA adapter over the base, and ``trainer_state.pt`` (optimizer moments, random generator
states) once it was trained. A checkpoint id names one set of weights forever: the serving side
tags every rollout with it and the warehouse builds batches by it, so an id is never reused and
every file carries its sha256, checked before every load.

A checkpoint appears whole or not at all: it is written into ``<root>/.tmp-<id>-<hex>/``, synced
to disk, and renamed into place. A crash leaves only such a hidden directory, which listing
ignores and the next ``register`` of that id removes. Rejected candidates are kept too: why a
candidate failed the eval gate is worth as much as what passed it.
"""

from __future__ import annotations

import builtins
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from checkpoints.lines import serving_for, shared_base_for
from checkpoints.record import (
    INFO_FILE,
    TRANSITIONS,
    CheckpointInfo,
    ModelRef,
    TrainingRef,
    WeightsRef,
    check_checkpoint_id,
)
from infra.durable import fsync_dir
from ingest.contract import now_ts
from models.catalog import file_sha256

_TMP_PREFIX = ".tmp-"
_TMP_DIR = re.compile(r"\.tmp-(?P<id>.+)-[0-9a-f]{32}")


def _sync_and_hash(path: Path) -> str:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
    return file_sha256(path)


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

    def register(self, *, checkpoint_id: str, parent: str | None, model: ModelRef,
                 weights: WeightsRef, training: TrainingRef,
                 files: dict[str, Callable[[Path], None]], evals: dict[str, Any],
                 batches: tuple[str, ...] | list[str], status: str,
                 reasons: tuple[str, ...] | list[str] = (),
                 org_id: str | None = None) -> CheckpointInfo:  # fmt: skip
        """Store a checkpoint under a new id, atomically; returns what was recorded.

        ``files`` writes each named file into the (temporary) checkpoint directory; the files
        that ``weights.file`` and ``training.file`` name get their sha256 recorded. ``org_id``:
        the organisation whose line it joins (None: the shared line); a lineage that crosses
        lines is refused (``checkpoints.lines``).
        """
        final = self._dir(checkpoint_id)
        if final.exists():
            raise ValueError(
                f"checkpoint {checkpoint_id!r} is registered already: an id names "
                "one set of weights forever, register under a new id"
            )
        if parent is not None and not (self._dir(parent) / INFO_FILE).is_file():
            raise ValueError(f"parent {parent!r} of {checkpoint_id!r} is not registered")
        shared_base = shared_base_for(org_id, self.get(parent) if parent is not None else None)
        for name in (weights.file, training.file):
            if name is not None and name not in files:
                raise ValueError(f"{name} is named but not written")
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_leftovers(checkpoint_id)
        tmp = self.root / f"{_TMP_PREFIX}{checkpoint_id}-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            digests = {}
            for name, write in files.items():
                write(tmp / name)
                digests[name] = _sync_and_hash(tmp / name)
            if weights.file is not None:
                weights = weights.model_copy(update={"sha256": digests[weights.file]})
            if training.file is not None:
                training = training.model_copy(update={"sha256": digests[training.file]})
            info = CheckpointInfo(
                checkpoint_id,
                parent,
                str(final),
                model,
                weights,
                training,
                now_ts(),
                evals,
                tuple(batches),
                status,
                tuple(reasons),
                org_id,
                shared_base,
            )
            info_json = orjson.dumps(info.to_json_dict(), option=orjson.OPT_INDENT_2)
            _write_synced(tmp / INFO_FILE, info_json)
            fsync_dir(tmp)
            try:
                os.rename(tmp, final)
            except OSError as exc:  # another writer registered the id meanwhile
                raise ValueError(
                    f"checkpoint {checkpoint_id!r} is registered already ({exc.strerror})"
                ) from None
            fsync_dir(self.root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        return info

    def checked_file(self, info: CheckpointInfo, name: str, sha256: str | None) -> Path:
        """A file of a checkpoint, after checking its sha256 against the registered one."""
        path = info.file(name)
        digest = file_sha256(path)
        if digest != sha256:
            raise ValueError(
                f"{path}: sha256 {digest} differs from the registered {sha256}: "
                "the file was changed or damaged"
            )
        return path

    def _remove_leftovers(self, checkpoint_id: str) -> None:
        """Temp directories of this id that a crashed ``register`` left behind."""
        for path in self.root.glob(f"{_TMP_PREFIX}*"):
            match = _TMP_DIR.fullmatch(path.name)
            if match and match["id"] == checkpoint_id and path.is_dir():
                shutil.rmtree(path)

    def restage(self, checkpoint_id: str, status: str, reasons: tuple[str, ...] = (),
                evals: dict[str, Any] | None = None) -> CheckpointInfo:  # fmt: skip
        """Move a canary to its outcome (``TRANSITIONS``): promoted or rejected, with ``evals``
        merged into its figures and the stage appended to ``evals["stages"]`` (or, staying a
        canary, only the figures of one more look).

        The weights never change; only ``checkpoint.json`` is replaced, atomically (a synced
        temporary file renamed over it). Any other change is refused, so a canary is promoted
        at most once: a second call finds it promoted already and raises.
        """
        info = self.get(checkpoint_id)
        if (info.status, status) not in TRANSITIONS:
            raise ValueError(
                f"checkpoint {checkpoint_id!r} is {info.status}: it cannot become {status}"
            )
        merged = {**info.evals, **(evals or {})}
        if status != info.status:
            merged["stages"] = [*info.evals.get("stages", []), {"stage": status, "at": now_ts()}]
        updated = replace(info, evals=merged, status=status, reasons=tuple(reasons))
        path = self._dir(checkpoint_id) / INFO_FILE
        tmp = path.with_name(f"{_TMP_PREFIX}{INFO_FILE}-{uuid.uuid4().hex}")
        try:
            _write_synced(tmp, orjson.dumps(updated.to_json_dict(), option=orjson.OPT_INDENT_2))
            os.rename(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(path.parent)
        return updated

    def get(self, checkpoint_id: str) -> CheckpointInfo:
        path = self._dir(checkpoint_id) / INFO_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise KeyError(
                f"no checkpoint {checkpoint_id!r} in the registry at {self.root}"
            ) from None
        try:
            info = CheckpointInfo.from_json_dict(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None
        if info.checkpoint_id != checkpoint_id:
            raise ValueError(f"{path} describes {info.checkpoint_id!r}, not {checkpoint_id!r}")
        return info

    def list(self) -> list[CheckpointInfo]:
        """Every registered checkpoint, oldest first (by ``created_at``, then id)."""
        if not self.root.is_dir():
            return []
        infos = [
            self.get(path.name)
            for path in self.root.iterdir()
            if not path.name.startswith(".") and (path / INFO_FILE).is_file()
        ]
        return sorted(infos, key=lambda info: (info.created_at, info.checkpoint_id))

    def current(self, org_id: str | None = None) -> CheckpointInfo | None:
        """What serves ``org_id`` (None: the shared line): its line's latest promoted
        checkpoint while that grows on the shared line's current one, else the shared line's
        latest promoted checkpoint; None before the first (``checkpoints.lines``)."""
        return serving_for(self.list(), org_id)

    def remove(self, checkpoint_id: str) -> None:
        """Delete the checkpoint, its weights and record (``rtrl forget --org``): renamed out of
        the registry's listing first, so that a crash midway leaves it gone, not half there."""
        path = self._dir(checkpoint_id)
        if not (path / INFO_FILE).is_file():
            raise KeyError(f"no checkpoint {checkpoint_id!r} in the registry at {self.root}")
        doomed = self.root / f".removing-{checkpoint_id}"
        path.rename(doomed)
        shutil.rmtree(doomed)

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

    def root_of(self, checkpoint_id: str) -> str:
        """The first checkpoint of the lineage: the fixed reference of the KL penalty."""
        return self.lineage(checkpoint_id)[-1]


def next_id(registry: CheckpointRegistry, parent: CheckpointInfo) -> str:
    """The parent's prefix and the next free number: ``tiny-0000`` → ``tiny-0001``.

    Numbers count every registered checkpoint of the prefix, rejected ones too, so an id is
    never reused.
    """
    match = re.fullmatch(r"(.*?)-?(\d+)", parent.checkpoint_id)
    prefix = match.group(1) if match else parent.checkpoint_id
    taken = [
        int(m.group(1))
        for info in registry.list()
        if (m := re.fullmatch(re.escape(prefix) + r"-?(\d+)", info.checkpoint_id))
    ]
    return f"{prefix}-{max(taken, default=0) + 1:04d}"
