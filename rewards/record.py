"""The reward record: one row per interaction, the fields and order of reward spec v1.

A censored record has no reward and no terms. A privacy-mode record keeps only ids, times and
counts: no ``user_id``, no terms, no reward, and no ``dissatisfied`` (a judgement of the user's
message, not a count).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from itertools import accumulate, chain
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pyarrow as pa

from ingest.contract.timestamps import format_ts
from rewards.timestamps import to_datetime, to_us

SCORED = "scored"
CENSORED = "censored"
NO_OUTCOME = "no_outcome"
PRIVACY_MODE = "privacy_mode"

TERM_FIELDS = ("r_edit", "r_followup", "r_tool", "r_clarify", "r_latency")
_TIME_FIELDS = ("t_open", "t_close")


@dataclass(frozen=True, slots=True)
class RewardRecord:
    """One interaction's reward, the same whether computed live or replayed."""

    interaction_id: str
    revision: int
    reward_version: str
    status: str  # "scored" | "censored"
    censor_reason: str | None  # None | "no_outcome" | "privacy_mode"
    reward: float | None  # sum of the terms rounded; None when censored
    r_edit: float | None
    r_followup: float | None
    r_tool: float | None
    r_clarify: float | None
    r_latency: float | None
    org_id: str | None
    user_id: str | None  # None in privacy mode
    session_id: str | None
    checkpoint_id: str | None
    experiment_name: str | None
    experiment_arm: str | None
    t_open: datetime  # aware, UTC
    t_close: datetime  # t_open + window
    n_events: int  # distinct in-window events
    n_duplicates: int  # extra copies that were not expired
    n_late: int  # distinct late events
    n_orphans: int
    n_edits: int
    n_accepted: int
    n_rejected: int
    n_reverted: int
    n_tool_calls: int  # every in-window agent.tool_call, valid or not
    n_invalid_tool_calls: int
    n_clarifying: int
    n_subagents: int
    n_subagents_unused: int
    dissatisfied: bool | None  # None in privacy mode
    event_ids: tuple[str, ...]  # in-window ids in (ts, event_id) order

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-ready dict: times as ``...Z`` strings with microseconds, ids as a list."""
        out = {name: getattr(self, name) for name in FIELD_NAMES}
        out["t_open"] = format_ts(self.t_open)
        out["t_close"] = format_ts(self.t_close)
        out["event_ids"] = list(self.event_ids)
        return out

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> RewardRecord:
        """Inverse of :meth:`to_json_dict`; rejects missing or unknown fields."""
        if set(data) != set(FIELD_NAMES):
            missing, extra = set(FIELD_NAMES) - set(data), set(data) - set(FIELD_NAMES)
            raise ValueError(
                f"record fields differ: missing {sorted(missing)}, extra {sorted(extra)}"
            )
        values = dict(data)
        for name in _TIME_FIELDS:
            values[name] = to_datetime(to_us(values[name]))
        values["event_ids"] = tuple(values["event_ids"])
        return cls(**values)


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RewardRecord))

_UTC_US = pl.Datetime("us", "UTC")
_RECORD_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "interaction_id": pl.String,
    "revision": pl.Int64,
    "reward_version": pl.String,
    "status": pl.String,
    "censor_reason": pl.String,
    "reward": pl.Float64,
    **{name: pl.Float64 for name in TERM_FIELDS},
    "org_id": pl.String,
    "user_id": pl.String,
    "session_id": pl.String,
    "checkpoint_id": pl.String,
    "experiment_name": pl.String,
    "experiment_arm": pl.String,
    "t_open": _UTC_US,
    "t_close": _UTC_US,
    **{name: pl.Int64 for name in FIELD_NAMES if name.startswith("n_")},
    "dissatisfied": pl.Boolean,
    "event_ids": pl.List(pl.String),
}
RECORD_SCHEMA = pl.Schema(_RECORD_COLUMNS)
assert tuple(RECORD_SCHEMA.names()) == FIELD_NAMES, "RECORD_SCHEMA must follow the record's order"
assert FIELD_NAMES[-1] == "event_ids"


def records_to_frame(records: list[RewardRecord]) -> pl.DataFrame:
    """Records as a DataFrame with :data:`RECORD_SCHEMA` (built column by column, for speed)."""
    columns: dict[str, Any] = {
        name: [getattr(r, name) for r in records] for name in FIELD_NAMES[:-1]
    }
    columns["event_ids"] = _string_lists([r.event_ids for r in records])
    return pl.DataFrame(columns, schema=RECORD_SCHEMA)


def _string_lists(lists: list[tuple[str, ...]]) -> pl.Series:
    """A list[str] column from offsets and one flat array: polars builds one series per row else."""
    offsets = pa.array(list(accumulate(map(len, lists), initial=0)), type=pa.int64())
    values = pa.array(list(chain.from_iterable(lists)), type=pa.large_string())
    return pl.Series("event_ids", pa.LargeListArray.from_arrays(offsets, values))


def frame_to_records(frame: pl.DataFrame) -> list[RewardRecord]:
    """Rows of a :data:`RECORD_SCHEMA` frame back as records."""
    out = []
    for row in frame.select(FIELD_NAMES).iter_rows(named=True):
        row["event_ids"] = tuple(row["event_ids"])
        out.append(RewardRecord(**row))
    return out


def read_records(path: str | Path) -> pl.DataFrame:
    """Records from Parquet (as the replay writes) or JSON lines (``to_json_dict`` per line)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        return pl.read_parquet(path).select(FIELD_NAMES).cast(RECORD_SCHEMA)
    with open(path, "rb") as lines:
        return records_to_frame(
            [RewardRecord.from_json_dict(orjson.loads(line)) for line in lines if line.strip()]
        )
