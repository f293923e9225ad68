"""The shape of a training batch: its manifest entry and its data file. Pure.

A batch is the scored reward records of one (checkpoint, reward version) that passed the quality
gate, frozen in one Parquet file so a trainer reads exactly what was validated. Its manifest entry
is a row of the ``batches`` table and the value of the event on the ``batches`` topic.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import polars as pl

from rewards.record import RECORD_SCHEMA
from warehouse.layout import BATCHES_DIR, QUARANTINE_DIR, join

PASSED, FAILED = "passed", "failed"

_Columns = dict[str, pl.DataType | type[pl.DataType]]
_MANIFEST_COLUMNS: _Columns = {
    "batch_id": pl.String, "checkpoint_id": pl.String, "reward_version": pl.String,
    "n_rows": pl.Int64, "files": pl.List(pl.String), "quality": pl.String,
    "offered": pl.Boolean, "created_at": pl.Datetime("us", "UTC"),
}  # fmt: skip
MANIFEST_SCHEMA = pl.Schema(_MANIFEST_COLUMNS)
# rollout_json: the interaction's last rollout; trajectory_json: all of them, in the order they
# were published (every call of an agent run; the learner deduplicates by call id)
_BATCH_DATA_COLUMNS: _Columns = {"batch_id": pl.String, **RECORD_SCHEMA, "rollout_json": pl.String,
                                 "trajectory_json": pl.List(pl.String)}  # fmt: skip
BATCH_DATA_SCHEMA = pl.Schema(_BATCH_DATA_COLUMNS)


@dataclass(frozen=True)
class BatchEntry:
    """One manifest row: what a trainer needs to find, trust and trace a batch."""

    batch_id: str
    checkpoint_id: str
    reward_version: str
    n_rows: int
    files: tuple[str, ...]  # relative to the warehouse root
    quality: str  # "passed" | "failed"
    offered: bool  # passed the gate and is ready for training
    created_at: datetime

    def to_json_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["files"] = list(self.files)
        out["created_at"] = self.created_at.isoformat().replace("+00:00", "Z")
        return out

    def to_frame(self) -> pl.DataFrame:
        row = asdict(self)
        row["files"] = list(self.files)
        return pl.DataFrame([row], schema=MANIFEST_SCHEMA)


def batch_id(checkpoint_id: str, reward_version: str, interaction_ids: list[str],
             created_at: datetime) -> str:  # fmt: skip
    """Readable and unique: checkpoint, time, and a hash of exactly which interactions.

    >>> from datetime import UTC
    >>> batch_id("ckpt-1", "v1-abc", ["i2", "i1"], datetime(2026, 11, 30, 3, tzinfo=UTC))
    'b-ckpt-1-20261130T030000Z-2b55c91f'
    """
    digest = hashlib.sha256(
        "\n".join([checkpoint_id, reward_version, *sorted(interaction_ids)]).encode()
    ).hexdigest()[:8]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in checkpoint_id)
    return f"b-{safe}-{created_at.strftime('%Y%m%dT%H%M%SZ')}-{digest}"


def manifest_file(batch: str) -> str:
    return join(BATCHES_DIR, "manifest", f"{batch}.parquet")


def data_file(batch: str, quality: str) -> str:
    """Offered batches and quarantined ones live apart, so no glob can mix them up."""
    if quality == PASSED:
        return join(BATCHES_DIR, "data", f"{batch}.parquet")
    return join(QUARANTINE_DIR, batch, "data.parquet")


def report_file(batch: str, quality: str) -> str:
    folder = join(BATCHES_DIR, "reports") if quality == PASSED else join(QUARANTINE_DIR, batch)
    return join(folder, f"{batch}.validation.json" if quality == PASSED else "validation.json")
