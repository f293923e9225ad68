"""A rollout: what the serving side generated for one interaction (the ``rollouts`` topic's value).

events-v1 names its content (the checkpoint, prompt and completion token ids, the behaviour
policy's log-probabilities) but not its form; this is the form, versioned like the events.
Version 2 carries what a correct learner needs besides the tokens:

    {"rollout_version": 2, "interaction_id": ..., "checkpoint_id": ...,
     "model": {"family": "llama", "base_sha256": ..., "tokenizer_sha256": ...},
     "sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 64, "stop": []},
     "prompt_ids": [...], "completion_ids": [...], "logprobs": [...],
     "finish_reason": "stop" | "length", "experiment": {"name": ..., "arm": ...} | null,
     "created_at": "...Z", "constraint": {"library": ..., "version": ..., "grammar": ...,
     "options": {...}},
     "turn": {"call_id": ..., "parent_call_id": ... | null, "segment": 0, "prefix_len": 0,
              "broken_calls": 0}}

``logprobs[i]`` is the log-probability of ``completion_ids[i]`` under the distribution it was
drawn from (the checkpoint's at that temperature and nucleus, ``models.sampling``); the learner
scores the same tokens under the same transformation, so the importance ratio compares like
with like. The tokenizer hash says which vocabulary the ids are in: a rollout of another
tokenizer is never trained on. ``constraint`` (optional: absent or null in a rollout sampled
freely, and in every rollout written before it existed) is the grammar the completion was
decoded under (``models.constraint``): its log-probabilities are of the masked distribution, so
the learner scores it under the same masks. ``turn`` (optional, written by the gateway for
chat calls) places the call in its agent run: an interaction is every call of one run, each
with its own rollout; ``call_id`` is the answer's id, ``parent_call_id`` the answer it extends
(null for the first call of a segment), ``segment`` numbers the runs of calls that extend one
another token for token, and the first ``prefix_len`` prompt ids are the parent's prompt and
completion ids exactly (spliced, never re-tokenised; 0 when the prompt was rendered whole), so
the model's own earlier tokens and the environment's (tool results, user turns) can be told
apart by position; ``broken_calls`` (optional, 0 when absent) counts the tool calls of this
answer the gateway could not read (each ``<tool_call>`` of an answer served as text), so that
the learner charges a broken call's penalty to the turn that made it and those before it.
Version 1 (token ids without model or sampling) is refused with its own reason: a learner
cannot know how its tokens were drawn.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

from ingest.contract import ContractError, normalize_ts
from models.constraint import Constraint
from models.sampling import SamplingParams

ROLLOUT_VERSION = 2
FINISH_REASONS = ("stop", "length")
_FIELDS = ("rollout_version", "interaction_id", "checkpoint_id", "model", "sampling",
           "prompt_ids", "completion_ids", "logprobs", "finish_reason", "experiment",
           "created_at")  # fmt: skip
_OPTIONAL_FIELDS = ("constraint", "turn", "org_id")
_MODEL_FIELDS = ("family", "base_sha256", "tokenizer_sha256")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class TurnRef:
    """A chat call's place in its agent run (see the module's ``turn``)."""

    call_id: str
    parent_call_id: str | None
    segment: int
    prefix_len: int
    broken_calls: int = 0  # tool calls the gateway could not read in this answer (served as text)

    def __post_init__(self) -> None:
        if not isinstance(self.call_id, str) or not 1 <= len(self.call_id) <= 128:
            raise RolloutError(f"turn.call_id: 1 to 128 characters, got {self.call_id!r}")
        if self.parent_call_id is not None and not isinstance(self.parent_call_id, str):
            raise RolloutError("turn.parent_call_id: a string or null")
        for name in ("segment", "prefix_len", "broken_calls"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise RolloutError(f"turn.{name}: an integer >= 0, got {value!r}")

    def to_json_dict(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "parent_call_id": self.parent_call_id,
                "segment": self.segment, "prefix_len": self.prefix_len,
                "broken_calls": self.broken_calls}  # fmt: skip


class RolloutError(ValueError):
    """A rollout that breaks the form above: ``reason`` is a code for counting, the message
    says which field and why."""

    def __init__(self, message: str, reason: str = "bad_rollout") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ModelIdentity:
    """Which model produced a rollout: its architecture, base weights and tokenizer."""

    family: str
    base_sha256: str
    tokenizer_sha256: str

    def __post_init__(self) -> None:
        if not isinstance(self.family, str) or not 1 <= len(self.family) <= 64:
            raise RolloutError(f"model.family: 1 to 64 characters, got {self.family!r}")
        for name in ("base_sha256", "tokenizer_sha256"):
            value = getattr(self, name)
            if not isinstance(value, str) or _SHA256.fullmatch(value) is None:
                raise RolloutError(f"model.{name}: 64 lower-case hex digits, got {value!r}")

    def to_json_dict(self) -> dict[str, str]:
        return {
            "family": self.family,
            "base_sha256": self.base_sha256,
            "tokenizer_sha256": self.tokenizer_sha256,
        }


@dataclass(frozen=True)
class Experiment:
    """The A/B assignment of the interaction, the same object as the events' ``experiment``."""

    name: str
    arm: str

    def __post_init__(self) -> None:
        for key in ("name", "arm"):
            value = getattr(self, key)
            if not isinstance(value, str) or not 1 <= len(value) <= 64:
                raise RolloutError(f"experiment.{key}: 1 to 64 characters, got {value!r}")


@dataclass(frozen=True)
class Rollout:
    interaction_id: str
    checkpoint_id: str
    model: ModelIdentity
    sampling: SamplingParams
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str
    created_at: str  # canonical UTC timestamp
    experiment: Experiment | None = None  # the A/B arm that served it, as in events-v1
    constraint: Constraint | None = None  # the grammar it was decoded under, if any
    turn: TurnRef | None = None  # the call's place in its agent run (chat calls)
    # the organisation of the API key that asked; None in rollouts written before tenancy
    org_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("interaction_id", "checkpoint_id", "org_id"):
            value = getattr(self, name)
            if name == "org_id" and value is None:
                continue
            if not isinstance(value, str) or not 1 <= len(value) <= 128:
                raise RolloutError(f"{name}: a string of 1 to 128 characters, got {value!r}")
        for name in ("prompt_ids", "completion_ids"):
            ids = getattr(self, name)
            if not ids or not all(type(t) is int and t >= 0 for t in ids):
                raise RolloutError(f"{name}: a non-empty list of integers >= 0")
        if len(self.completion_ids) > self.sampling.max_tokens:
            raise RolloutError(
                f"completion_ids: {len(self.completion_ids)} tokens, more than "
                f"sampling.max_tokens {self.sampling.max_tokens}"
            )
        if len(self.logprobs) != len(self.completion_ids):
            raise RolloutError(
                f"logprobs: one per completion token ({len(self.completion_ids)}),"
                f" got {len(self.logprobs)}"
            )
        for value in self.logprobs:
            if type(value) not in (int, float) or not math.isfinite(value) or value > 0:
                raise RolloutError(f"logprobs: finite numbers <= 0, got {value!r}")
        if self.finish_reason not in FINISH_REASONS:
            raise RolloutError(
                f"finish_reason: one of {list(FINISH_REASONS)}, got {self.finish_reason!r}"
            )
        if self.turn is not None and self.turn.prefix_len > len(self.prompt_ids):
            raise RolloutError("turn.prefix_len: longer than the prompt")
        try:
            object.__setattr__(self, "created_at", normalize_ts(self.created_at, "created_at"))
        except ContractError as exc:
            raise RolloutError(f"created_at: {exc.detail}") from None

    def to_json_dict(self) -> dict[str, Any]:
        return (
            {
                "rollout_version": ROLLOUT_VERSION,
                "interaction_id": self.interaction_id,
                "checkpoint_id": self.checkpoint_id,
                "model": self.model.to_json_dict(),
                "sampling": self.sampling.to_json_dict(),
                "prompt_ids": self.prompt_ids,
                "completion_ids": self.completion_ids,
                "logprobs": self.logprobs,
                "finish_reason": self.finish_reason,
                "experiment": None
                if self.experiment is None
                else {"name": self.experiment.name, "arm": self.experiment.arm},
                "created_at": self.created_at,
            }
            | ({} if self.constraint is None else {"constraint": self.constraint.to_json_dict()})
            | ({} if self.turn is None else {"turn": self.turn.to_json_dict()})
            | ({} if self.org_id is None else {"org_id": self.org_id})
        )

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, raw: bytes | str) -> Rollout:
        """Parse and check a rollout; :class:`RolloutError` says why one is refused.

        >>> ident = ModelIdentity("llama", "a" * 64, "b" * 64)
        >>> r = Rollout("i1", "c1", ident, SamplingParams(max_tokens=4), (1, 2), (3,), (-0.5,),
        ...             "length", "2026-11-30T10:00:00Z")
        >>> Rollout.from_json(r.to_json()) == r, r.created_at
        (True, '2026-11-30T10:00:00.000000Z')
        >>> Rollout.from_json(r.to_json().replace(b"-0.5", b"0.5"))
        Traceback (most recent call last):
        ...
        models.rollout.RolloutError: logprobs: finite numbers <= 0, got 0.5
        >>> try:
        ...     Rollout.from_json(b'{"rollout_version": 1}')
        ... except RolloutError as exc:
        ...     print(exc.reason)
        old_rollout_version
        """
        try:
            data: Any = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RolloutError(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise RolloutError("a rollout is a JSON object")
        version = data.get("rollout_version")
        if version == 1:
            raise RolloutError(
                "rollout_version 1 carries no model or sampling parameters: a "
                "learner cannot know how its tokens were drawn; serve with a "
                "current rtrl",
                reason="old_rollout_version",
            )
        if version != ROLLOUT_VERSION:
            raise RolloutError(f"rollout_version: {ROLLOUT_VERSION} expected, got {version!r}")
        missing = set(_FIELDS) - set(data)
        extra = set(data) - set(_FIELDS) - set(_OPTIONAL_FIELDS)
        if missing or extra:
            raise RolloutError(f"fields: missing {sorted(missing)}, unknown {sorted(extra)}")
        for name in ("prompt_ids", "completion_ids", "logprobs"):
            if not isinstance(data[name], list):
                raise RolloutError(f"{name}: a list")
        model = data["model"]
        if not isinstance(model, dict) or set(model) != set(_MODEL_FIELDS):
            raise RolloutError(f"model: an object with exactly {list(_MODEL_FIELDS)}")
        try:
            sampling = SamplingParams.model_validate(data["sampling"])
        except ValueError as exc:
            raise RolloutError(f"sampling: {exc}".splitlines()[0]) from None
        experiment = data["experiment"]
        if experiment is not None and (not isinstance(experiment, dict)
                                       or set(experiment) != {"name", "arm"}):  # fmt: skip
            raise RolloutError("experiment: null or an object with exactly name and arm")
        constraint = None
        if data.get("constraint") is not None:
            try:
                constraint = Constraint.model_validate(data["constraint"])
            except ValueError as exc:
                raise RolloutError(f"constraint: {exc}".splitlines()[0]) from None
        turn = data.get("turn")
        if turn is not None:
            fields = {"call_id", "parent_call_id", "segment", "prefix_len"}
            allowed = fields | {"broken_calls"}  # optional: absent in rollouts written before it
            if not isinstance(turn, dict) or not fields <= set(turn) <= allowed:
                raise RolloutError(
                    f"turn: null or an object with {sorted(fields)} and optionally broken_calls"
                )
            turn = TurnRef(**turn)
        return cls(
            data["interaction_id"],
            data["checkpoint_id"],
            ModelIdentity(**model),
            sampling,
            tuple(data["prompt_ids"]),
            tuple(data["completion_ids"]),
            tuple(data["logprobs"]),
            data["finish_reason"],
            data["created_at"],
            None if experiment is None else Experiment(**experiment),
            constraint,
            turn,
            data.get("org_id"),
        )
