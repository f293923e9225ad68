"""A training round's saved state, so that a round killed at any point resumes instead of
starting over.

One file per round in progress, ``<registry>/.rounds/<candidate_id>.pt``: the trainable tensors,
the optimizer's state, the update's :class:`~trainer.learner.Progress` and a key naming the
round's inputs (parent, batches, learner settings, adapter). It is replaced atomically (written
beside, synced, renamed over), so it always holds one whole step. A state whose key differs
from the round asked for is stale (other inputs) and is discarded, never applied; the file is
removed once the candidate is registered.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import torch

from infra.durable import fsync_dir
from models.policy import CausalLMPolicy
from trainer.learner import Progress


class RoundStopped(Exception):
    """A round stopped on request (SIGTERM) before it registered a candidate; ``saved``: its
    update's state is on disk, and the next round of the same inputs resumes from it."""

    def __init__(self, candidate_id: str, where: str, saved: bool) -> None:
        state = (
            "its update's state is saved and resumed by the next start"
            if saved
            else ("nothing of it needed saving")
        )
        super().__init__(f"round {candidate_id} stopped during {where}: {state}")
        self.candidate_id, self.where, self.saved = candidate_id, where, saved


def round_key(**inputs: Any) -> str:
    """A stable hash of a round's inputs (JSON values)."""
    return hashlib.sha256(orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class SavedRound:
    progress: Progress
    optimizer_state: dict[str, Any]


class RoundStateFile:
    def __init__(self, registry_root: Path, candidate_id: str, key: str) -> None:
        self.path = Path(registry_root) / ".rounds" / f"{candidate_id}.pt"
        self.key = key

    def save(
        self, policy: CausalLMPolicy, progress: Progress, optimizer_state: dict[str, Any]
    ) -> None:
        trainable = {
            name: p.detach().cpu().clone()
            for name, p in policy.model.named_parameters()
            if p.requires_grad
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as out:
                torch.save(
                    {
                        "key": self.key,
                        "trainable": trainable,
                        "optimizer": optimizer_state,
                        "progress": progress.to_json_dict(),
                    },
                    out,
                )
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        finally:
            tmp.unlink(missing_ok=True)

    def load_into(self, policy: CausalLMPolicy) -> SavedRound | None:
        """Apply a saved state of this very round to ``policy``; None when there is none (a
        stale one is removed)."""
        if not self.path.is_file():
            return None
        saved = torch.load(self.path, map_location="cpu", weights_only=True)
        if saved.get("key") != self.key:
            self.path.unlink()
            return None
        params = dict(policy.model.named_parameters())
        with torch.no_grad():
            for name, tensor in saved["trainable"].items():
                params[name].copy_(tensor)
        return SavedRound(Progress.from_json_dict(saved["progress"]), saved["optimizer"])

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
