"""What a training round reads: the batches offered for a checkpoint that no checkpoint was
trained on yet, and the monitors' alarms of that checkpoint against its parent.

Both come through the warehouse's published interfaces, not its code: offered batches are the
announcements on the compacted ``batches`` topic (each names its data files relative to the
warehouse root), and the monitors read every record of the two checkpoints from the ``rewards``
mart of the DuckDB catalog (their rates are shares of all a checkpoint's interactions, not of a
batch's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson
import polars as pl

from checkpoints.record import PROMOTED
from checkpoints.store import CheckpointRegistry
from infra.compacted import read_latest
from rewards.monitors import Alarm, MonitorThresholds, checkpoint_rates, compare, load_thresholds


@dataclass(frozen=True)
class OfferedBatch:
    batch_id: str
    checkpoint_id: str
    files: tuple[str, ...]  # relative to the warehouse root


def offered_batches(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[OfferedBatch]:
    """Every batch announced on ``topic``, oldest announcement first."""
    batches = []
    for value in read_latest(bootstrap, topic, timeout_s).values():
        entry = orjson.loads(value)
        if entry.get("offered"):
            batches.append(
                (
                    entry["created_at"],
                    OfferedBatch(entry["batch_id"], entry["checkpoint_id"], tuple(entry["files"])),
                )
            )
    return [batch for _, batch in sorted(batches, key=lambda item: item[0])]


def untrained(batches: list[OfferedBatch], registry: CheckpointRegistry, checkpoint_id: str,
              warehouse: Path,
              org_id: str | None = None) -> list[tuple[str, list[Path]]]:  # fmt: skip
    """``(batch_id, data files)`` of ``checkpoint_id``'s batches that no promoted checkpoint
    of the line (``org_id``'s; None: the shared line) was trained on, when at least one of them
    is new (no candidate of the line tried it yet): the shared line and an organisation's each
    use a batch of the shared checkpoint once.

    A rejected candidate's batch stays available: it is still on-policy for its parent, and
    its held-out users stay the gate's evidence; the round trains on the newest of them only
    (``trainer.round_examples.training_window``). Batches that only rejected
    candidates tried, with nothing new beside them, would only reproduce the same rejection.
    A quarantined batch (its log-probabilities did not match the served weights) is used up
    like a promoted one's: its data would be as wrong next time.
    """
    infos = [i for i in registry.list() if i.org_id == org_id]
    promoted = {batch for info in infos if info.status == PROMOTED for batch in info.batches}
    promoted |= {batch for info in infos for batch in info.evals.get("quarantined", {})}
    tried = {batch for info in infos for batch in info.batches}
    own = [b for b in batches if b.checkpoint_id == checkpoint_id and b.batch_id not in promoted]
    if not any(b.batch_id not in tried for b in own):
        return []
    return [(b.batch_id, [warehouse / f for f in b.files]) for b in own]


def earlier_batches(batches: list[OfferedBatch], registry: CheckpointRegistry, parent_id: str,
                    depth: int, warehouse: Path) -> list[tuple[str, str, list[Path]]]:  # fmt: skip
    """``(batch_id, checkpoint_id, data files)`` of the batches that the ``depth`` checkpoints
    before ``parent_id`` on its lineage served (its parent's parent first in the walk; none at
    0), oldest announcement first; a quarantined batch (its log-probs did not match the served
    weights) never. Their held-out users judge the parent's candidates with both arms
    off-policy (``trainer.round_examples.read_earlier``)."""
    ancestors: list[str] = []
    info = registry.get(parent_id)
    while len(ancestors) < depth and info.parent is not None:
        info = registry.get(info.parent)
        ancestors.append(info.checkpoint_id)
    quarantined = {batch for i in registry.list() for batch in i.evals.get("quarantined", {})}
    return [(b.batch_id, b.checkpoint_id, [warehouse / f for f in b.files]) for b in batches
            if b.checkpoint_id in ancestors and b.batch_id not in quarantined]  # fmt: skip


def attempts_on(registry: CheckpointRegistry, parent_id: str,
                org_id: str | None = None) -> list[tuple[str, ...]]:  # fmt: skip
    """The batches each earlier candidate of ``parent_id`` on the line trained on, oldest
    first (``trainer.round_examples.training_window`` counts its window in them)."""
    return [info.batches for info in registry.list()
            if info.parent == parent_id and info.org_id == org_id]  # fmt: skip


def alarms_of(catalog: Path, registry: CheckpointRegistry, checkpoint_id: str,
              thresholds: Path | None = None, look: int | None = None,
              org_id: str | None = None) -> list[Alarm]:  # fmt: skip
    """The monitors' alarms of ``checkpoint_id`` against its registered parent (none for a root).

    ``look``: the how-manieth time this pair is judged. A served checkpoint is judged again each
    time a candidate is trained from it, on more data each time; at ``look`` the monitors test at
    ``stats.multiple.look_alpha``, so the stated alpha holds over all its looks, not per look.
    ``org_id``: an organisation's line is judged on its own users' records only."""
    parent = registry.get(checkpoint_id).parent
    if parent is None:
        return []
    with duckdb.connect(str(catalog), read_only=True) as con:
        records = con.sql("SELECT * FROM rewards").pl()
    if org_id is not None:
        records = records.filter(pl.col("org_id") == org_id)
    limits = load_thresholds(thresholds) if thresholds else MonitorThresholds()
    return compare(
        checkpoint_rates(records, checkpoint_id), checkpoint_rates(records, parent), limits, look
    )
