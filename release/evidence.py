"""A gate decision's evidence: one row per held-out interaction, enough to recompute the decision
anywhere without the model (``rtrl gate evaluate``).

Each row: ``user_id``, ``interaction_id``, ``reward`` (null for an interaction whose outcome
never came: censored rows stay in the evidence, ``release.offpolicy_bound``),
``behaviour_logprobs`` (the served policy's, per completion token, as the rollout recorded
them), ``candidate_logprobs`` (the candidate's for the same tokens, under the same sampling
transformation) and optionally ``org_id`` (the ids are unique within it: the unit is the
organisation's user; a row without it, written before, keys by the ids alone), ``session_id``
``full_support`` (true when the served
sampling could draw every token, no nucleus: then the bound may use the untruncated, centred
weights, ``CENTRED_METHOD``; absent or false, the clipped ones) and ``parent_logprobs`` (the
parent's for the same tokens, on a row an earlier checkpoint of the line served; absent or null
on the parent's own rows: both arms are then estimated off-policy). ``rtrl train`` writes it as
JSON lines beside the candidate (:data:`FILE`);
Parquet with the same columns is read too. JSON keeps every float exactly (shortest round-trip
form), so a re-run reproduces the stored figures to the last digit.

Pure but for the file: no torch; polars only to read Parquet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from release.offpolicy_bound import (
    CENTRED_METHOD,
    CENTRED_METHODS,
    METHOD,
    Estimate,
    estimate_gain,
    sequence_log_weights,
    user_key,
)

FILE = "gate_evidence.jsonl"
_REQUIRED = ("user_id", "interaction_id", "reward", "behaviour_logprobs", "candidate_logprobs")


@dataclass(frozen=True)
class EvidenceRow:
    user_id: str | None
    interaction_id: str
    reward: float | None  # None: censored (no outcome)
    behaviour_logprobs: tuple[float, ...]
    candidate_logprobs: tuple[float, ...]
    session_id: str | None = None
    full_support: bool = False  # the served sampling could draw every token (top_p = 1)
    org_id: str | None = None
    # the parent's log-probs for the same tokens where an earlier checkpoint served the row
    # (None: the parent served it; release.offpolicy_bound, both arms off-policy)
    parent_logprobs: tuple[float, ...] | None = None

    @property
    def unit(self) -> str:
        """The user the bound resamples this interaction with (``user_key``)."""
        return user_key(self.user_id, self.session_id, self.interaction_id, self.org_id)

    def to_json_dict(self) -> dict[str, Any]:
        """The row's JSON object; ``parent_logprobs`` only on a row an earlier checkpoint
        served, so that the parent's own rows are written as they always were."""
        data: dict[str, Any] = {
            "user_id": self.user_id,
            "interaction_id": self.interaction_id,
            "reward": self.reward,
            "behaviour_logprobs": list(self.behaviour_logprobs),
            "candidate_logprobs": list(self.candidate_logprobs),
            "session_id": self.session_id,
            "full_support": self.full_support,
            "org_id": self.org_id,
        }
        if self.parent_logprobs is not None:
            data["parent_logprobs"] = list(self.parent_logprobs)
        return data


def _row(data: Any, where: str) -> EvidenceRow:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a JSON object per line, got {type(data).__name__}")
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise ValueError(f"{where}: missing {missing}")
    reward = data["reward"]
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)
                               or not math.isfinite(reward)):  # fmt: skip
        raise ValueError(f"{where}: reward must be a finite number or null, got {reward!r}")
    behaviour, candidate, parent = (_logprobs(data.get(name), name, where) for name in
                                    ("behaviour_logprobs", "candidate_logprobs",
                                     "parent_logprobs"))  # fmt: skip
    if behaviour is None or candidate is None:
        raise ValueError(f"{where}: behaviour_logprobs and candidate_logprobs are required")
    if any(other is not None and len(other) != len(behaviour) for other in (candidate, parent)):
        raise ValueError(f"{where}: {len(behaviour)} behaviour log-probs, not as many candidate "
                         "or parent ones")  # fmt: skip
    ids = {}
    for name in ("user_id", "interaction_id", "session_id", "org_id"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where}: {name} must be a string or null, got {value!r}")
        ids[name] = value
    if not ids["interaction_id"]:
        raise ValueError(f"{where}: interaction_id must be a non-empty string")
    full_support = data.get("full_support") or False
    if not isinstance(full_support, bool):
        raise ValueError(f"{where}: full_support must be true, false or null, got {full_support!r}")
    return EvidenceRow(ids["user_id"], ids["interaction_id"],
                       None if reward is None else float(reward), behaviour, candidate,
                       ids["session_id"], full_support, ids["org_id"], parent)  # fmt: skip


def _logprobs(values: Any, name: str, where: str) -> tuple[float, ...] | None:
    """A row's list of finite log-probs (None where absent or null)."""
    if values is None:
        return None
    if not isinstance(values, list | tuple) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in values):  # fmt: skip
        raise ValueError(f"{where}: {name} must be a list of finite numbers")
    return tuple(float(v) for v in values)


def evidence_bytes(rows: Iterable[EvidenceRow]) -> bytes:
    """The rows as JSON lines."""
    return b"".join(orjson.dumps(row.to_json_dict()) + b"\n" for row in rows)


def write_evidence(path: str | Path, rows: Iterable[EvidenceRow]) -> Path:
    """The rows as JSON lines at ``path`` (written whole, then renamed into place)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(evidence_bytes(rows))
    tmp.replace(path)
    return path


def read_evidence(path: str | Path) -> list[EvidenceRow]:
    """Every row of a JSON-lines or Parquet evidence file; a malformed row is an error naming its
    line, never skipped."""
    path = Path(path)
    if path.suffix == ".parquet":
        import polars as pl

        records = pl.read_parquet(path).to_dicts()
        return [_row(record, f"{path} row {i + 1}") for i, record in enumerate(records)]
    rows = []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number}: not JSON ({exc})") from None
        rows.append(_row(data, f"{path} line {number}"))
    return rows


def method_for(rows: Sequence[EvidenceRow]) -> str:
    """The bound these rows allow: centred untruncated weights when every row was served with
    full support, else clipped ones (``release.offpolicy_bound``)."""
    return CENTRED_METHOD if rows and all(row.full_support for row in rows) else METHOD


def estimate_rows(rows: Sequence[EvidenceRow], *, level: float, resamples: int, seed: int,
                  weight_cap: float, reward_min: float, reward_max: float,
                  method: str | None = None) -> Estimate:  # fmt: skip
    """The gate's estimate and bound on evidence rows (``release.offpolicy_bound``; ``method``
    an earlier decision's bound, to re-run it as it was; by default :func:`method_for`)."""
    if not rows:
        raise ValueError("no evidence rows: nothing to estimate")
    method = method or method_for(rows)
    if method in CENTRED_METHODS and not all(row.full_support for row in rows):
        raise ValueError(f"{method} needs every row served with full support")
    parent = None
    if any(row.parent_logprobs is not None for row in rows):
        parent = sequence_log_weights(
            [r.behaviour_logprobs for r in rows],
            [r.behaviour_logprobs if r.parent_logprobs is None else r.parent_logprobs
             for r in rows],
        )  # fmt: skip
    return estimate_gain(
        [row.unit for row in rows],
        [row.reward for row in rows],
        sequence_log_weights(
            [r.behaviour_logprobs for r in rows], [r.candidate_logprobs for r in rows]
        ),  # fmt: skip
        level=level,
        resamples=resamples,
        seed=seed,
        weight_cap=weight_cap,
        reward_min=reward_min,
        reward_max=reward_max,
        method=method,
        parent_log_weights=parent,
    )
