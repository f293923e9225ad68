"""A rollout: what the serving side generated for one interaction (the ``rollouts`` topic's value).

events-v1 names its content (the checkpoint, prompt and completion token ids, the behaviour
policy's log-probabilities) but not its form; this is the form, versioned like the events:

    {"rollout_version": 1, "interaction_id": ..., "checkpoint_id": ..., "prompt_ids": [...],
     "completion_ids": [...], "logprobs": [...], "created_at": "...Z"}

``logprobs[i]`` is the log-probability the serving policy gave ``completion_ids[i]`` when it
sampled it. The trainer needs it to correct for a policy that moved since (the importance ratio
of the on-policy update) and to estimate a candidate's reward off-policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from ingest.contract import ContractError, normalize_ts

ROLLOUT_VERSION = 1
_FIELDS = ("rollout_version", "interaction_id", "checkpoint_id", "prompt_ids", "completion_ids",
           "logprobs", "created_at")  # fmt: skip


class RolloutError(ValueError):
    """A rollout that breaks the form above; the message says which field and why."""


@dataclass(frozen=True)
class Rollout:
    interaction_id: str
    checkpoint_id: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    created_at: str  # canonical UTC timestamp

    def __post_init__(self) -> None:
        for name in ("interaction_id", "checkpoint_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not 1 <= len(value) <= 128:
                raise RolloutError(f"{name}: a string of 1 to 128 characters, got {value!r}")
        for name in ("prompt_ids", "completion_ids"):
            ids = getattr(self, name)
            if not ids or not all(type(t) is int and t >= 0 for t in ids):
                raise RolloutError(f"{name}: a non-empty list of integers >= 0")
        if len(self.logprobs) != len(self.completion_ids):
            raise RolloutError(f"logprobs: one per completion token ({len(self.completion_ids)}),"
                               f" got {len(self.logprobs)}")
        for value in self.logprobs:
            if type(value) not in (int, float) or not math.isfinite(value) or value > 0:
                raise RolloutError(f"logprobs: finite numbers <= 0, got {value!r}")
        try:
            object.__setattr__(self, "created_at", normalize_ts(self.created_at, "created_at"))
        except ContractError as exc:
            raise RolloutError(f"created_at: {exc.detail}") from None

    def to_json(self) -> bytes:
        return orjson.dumps({"rollout_version": ROLLOUT_VERSION, "interaction_id":
                             self.interaction_id, "checkpoint_id": self.checkpoint_id,
                             "prompt_ids": self.prompt_ids, "completion_ids":
                             self.completion_ids, "logprobs": self.logprobs,
                             "created_at": self.created_at})

    @classmethod
    def from_json(cls, raw: bytes | str) -> Rollout:
        """Parse and check a rollout.

        >>> r = Rollout("i1", "c1", (1, 2), (3,), (-0.5,), "2026-11-30T10:00:00Z")
        >>> Rollout.from_json(r.to_json()) == r, r.created_at
        (True, '2026-11-30T10:00:00.000000Z')
        >>> Rollout.from_json(r.to_json().replace(b"-0.5", b"0.5"))
        Traceback (most recent call last):
        ...
        trainer.rollout.RolloutError: logprobs: finite numbers <= 0, got 0.5
        """
        try:
            data: Any = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RolloutError(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise RolloutError("a rollout is a JSON object")
        if data.get("rollout_version") != ROLLOUT_VERSION:
            raise RolloutError(f"rollout_version: {ROLLOUT_VERSION} expected, "
                               f"got {data.get('rollout_version')!r}")
        if set(data) != set(_FIELDS):
            missing, extra = set(_FIELDS) - set(data), set(data) - set(_FIELDS)
            raise RolloutError(f"fields: missing {sorted(missing)}, unknown {sorted(extra)}")
        for name in ("prompt_ids", "completion_ids", "logprobs"):
            if not isinstance(data[name], list):
                raise RolloutError(f"{name}: a list")
        return cls(data["interaction_id"], data["checkpoint_id"], tuple(data["prompt_ids"]),
                   tuple(data["completion_ids"]), tuple(data["logprobs"]), data["created_at"])
