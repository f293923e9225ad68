"""Merge the small files of one hive folder and Kafka partition into one.

Only files whose offsets are committed are merged (``safe_below``): a file at or past the
committed offset may still be removed and rewritten by a restarting sink. The merged file is
named after the whole range of its inputs and written durably before the inputs are removed; a
crash in between leaves inputs that the merged file covers, which the next compaction (or sink
start) removes as superseded. Readers never see a row twice for long, and the marts deduplicate.
Temporary files that a crash left behind (an hour old or more) are removed too.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping

import polars as pl

from warehouse.layout import DATASETS, PartFile, join, part_name, superseded
from warehouse.store import Store

log = logging.getLogger(__name__)

SMALL_BYTES = 16 * 1024 * 1024  # files below this size are merged
STALE_TMP_S = 3600.0  # a temporary file this old was left by a crash


def compact(store: Store, safe_below: Mapping[tuple[str, int], int] | None = None,
            small_bytes: int = SMALL_BYTES) -> int:  # fmt: skip
    """Merge small committed files; returns how many files were removed.

    ``safe_below`` maps (dataset, Kafka partition) to its committed offset; partitions absent
    from it are left alone. ``None`` means the caller knows no sink is running: merge all.
    """
    removed = 0
    for dataset in DATASETS:
        removed += store.remove_stale_temporaries(dataset, STALE_TMP_S)
        parts = dict((part, rel) for rel, part in store.parts(dataset))
        for stale in superseded(parts):
            store.remove(parts.pop(stale))
            removed += 1
        groups: dict[tuple[str, int], list[PartFile]] = defaultdict(list)
        for part in parts:
            limit = None if safe_below is None else safe_below.get((dataset, part.partition))
            if safe_below is not None and (limit is None or part.last >= limit):
                continue
            if store.fs.size(store.path(parts[part])) < small_bytes:
                groups[(part.folder, part.partition)].append(part)
        for (folder, partition), members in groups.items():
            if len(members) < 2:
                continue
            members.sort()
            frame = pl.concat([store.read_parquet(parts[m]) for m in members],
                              how="vertical_relaxed").sort("_offset")  # fmt: skip
            merged = join(folder, part_name(partition, members[0].first, members[-1].last))
            store.write_parquet(merged, frame)
            for m in members:
                if parts[m] != merged:
                    store.remove(parts[m])
                    removed += 1
            log.info("compacted %d files into %s", len(members), merged)
    return removed
