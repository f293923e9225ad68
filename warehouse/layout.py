"""Where the warehouse keeps each file: pure path arithmetic, no I/O.

Data files live under ``<root>/<dataset>/<hive partitions>/`` and are named after the Kafka
partition and the offset range they hold::

    <root>/rewards/date=2026-11-30/checkpoint=ckpt-0001/part-3-00000000000000000100-00000000000000000199.parquet

The name is the file's identity: writing the same (topic, partition, offset range) again
replaces the file instead of adding a copy, and a file whose range another file of the same
folder and partition covers is superseded (left over from a compaction that was interrupted).
Offsets are zero-padded so that names sort in offset order. Partition values are
percent-encoded, so an id holding ``/`` or ``=`` cannot escape its folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

# dataset name in the warehouse -> base topic name of events-v1.md
DATASETS = {
    "rewards": "rewards",
    "events": "telemetry.events",
    "rollouts": "rollouts",
    "late": "telemetry.late",
    "dlq": "telemetry.dlq",
    "checkpoints": "checkpoints",
}
NULL_VALUE = "__null__"  # the folder of rows whose partition value is missing
OFFSET_DIGITS = 20
_PART = re.compile(r"^part-(\d+)-(\d+)-(\d+)\.parquet$")

BATCHES_DIR = "_batches"  # manifest and offered batch data
QUARANTINE_DIR = "_quarantine"  # batches that failed a quality gate, with their reports
PRIVACY_DIR = "_privacy"  # the list of forgotten users
SCHEMA_DIR = "_schema"  # an empty file per dataset and set of columns, read with its files


@dataclass(frozen=True, order=True)
class PartFile:
    """A data file's identity, parsed from its path."""

    folder: str  # the hive folder, relative to the root
    partition: int  # Kafka partition
    first: int  # first offset held
    last: int  # last offset held (inclusive)

    def covers(self, other: PartFile) -> bool:
        return (self.folder == other.folder and self.partition == other.partition
                and self.first <= other.first and other.last <= self.last)  # fmt: skip


def join(*parts: str) -> str:
    """Join path segments with ``/`` (fsspec paths and URLs use it everywhere).

    >>> join("s3://bucket/wh/", "rewards", "date=2026-11-30")
    's3://bucket/wh/rewards/date=2026-11-30'
    """
    head, *rest = parts
    return "/".join([head.rstrip("/"), *(p.strip("/") for p in rest if p)])


def hive_folder(dataset: str, partitions: Iterable[tuple[str, str | None]]) -> str:
    """The folder of one hive partition, relative to the root.

    >>> hive_folder("rewards", [("date", "2026-11-30"), ("checkpoint", "team/a=b")])
    'rewards/date=2026-11-30/checkpoint=team%2Fa%3Db'
    >>> hive_folder("events", [("date", None)])
    'events/date=__null__'
    """
    segments = [f"{key}={NULL_VALUE if value is None else quote(value, safe='')}"
                for key, value in partitions]  # fmt: skip
    return "/".join([dataset, *segments])


def part_name(partition: int, first: int, last: int) -> str:
    """File name of the offsets ``first..last`` of one Kafka partition.

    >>> part_name(3, 100, 199)
    'part-3-00000000000000000100-00000000000000000199.parquet'
    """
    if not 0 <= first <= last:
        raise ValueError(f"bad offset range {first}..{last}")
    return f"part-{partition}-{first:0{OFFSET_DIGITS}d}-{last:0{OFFSET_DIGITS}d}.parquet"


def parse_part(relative_path: str) -> PartFile | None:
    """The identity of a data file from its path relative to the root; None for other files.

    >>> parse_part("rewards/d=1/part-3-00000000000000000100-00000000000000000199.parquet")
    PartFile(folder='rewards/d=1', partition=3, first=100, last=199)
    >>> parse_part("rewards/date=2026-11-30/.part-3-1-2.parquet.a1b2.tmp") is None
    True
    """
    folder, _, name = relative_path.rpartition("/")
    match = _PART.match(name)
    if match is None:
        return None
    partition, first, last = (int(g) for g in match.groups())
    return PartFile(folder, partition, first, last)


def partition_value(relative_folder: str, key: str) -> str | None:
    """Decode one hive value from a folder path.

    >>> partition_value("rewards/date=2026-11-30/checkpoint=team%2Fa", "checkpoint")
    'team/a'
    """
    for segment in relative_folder.split("/"):
        name, sep, value = segment.partition("=")
        if sep and name == key:
            return None if value == NULL_VALUE else unquote(value)
    return None


def superseded(files: Iterable[PartFile]) -> list[PartFile]:
    """Files whose rows another file of the same folder and Kafka partition also holds.

    >>> a = PartFile("r/d=1", 0, 0, 9); b = PartFile("r/d=1", 0, 10, 19)
    >>> merged = PartFile("r/d=1", 0, 0, 19)
    >>> [(p.first, p.last) for p in superseded([a, b, merged])]
    [(0, 9), (10, 19)]
    >>> superseded([a, b])
    []
    """
    files = sorted(set(files))
    return [f for f in files if any(g != f and g.covers(f) for g in files)]


def uncommitted(files: Iterable[PartFile], dataset: str, partition: int,
                committed: int) -> list[PartFile]:  # fmt: skip
    """Files of one Kafka partition written at or after the committed offset: output of a run
    that stopped before it could commit. They are removed on start, then written again.

    >>> f = [PartFile("rewards/d=1", 0, 0, 9), PartFile("rewards/d=1", 0, 10, 14),
    ...      PartFile("rewards/d=1", 1, 10, 14)]
    >>> uncommitted(f, "rewards", 0, 10)
    [PartFile(folder='rewards/d=1', partition=0, first=10, last=14)]
    """
    return [f for f in files
            if f.partition == partition and f.first >= committed
            and f.folder.split("/", 1)[0] == dataset]  # fmt: skip
