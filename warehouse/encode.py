"""Kafka messages of one topic partition -> columnar tables, one per hive partition. Pure.

* ``rewards``: the reward record's columns (:data:`rewards.record.RECORD_SCHEMA`, times as UTC
  datetimes), partitioned by the UTC date of ``t_open`` and by ``checkpoint_id``.
* ``events`` (the raw archive of ``telemetry.events``): the layout that
  :func:`rewards.eventio.read_events` reads, so replay and backfill run on it; partitioned by the
  UTC date of ``received_at``. A privacy-mode event is archived without its ``user_id``: nothing
  but ids and counts of such an interaction is stored.
* ``rollouts``: the topic has no fixed schema yet, so each value is kept whole as JSON text beside
  the key, the ``checkpoint_id`` it names and the broker's timestamp; partitioned by the date of
  that timestamp and by checkpoint.
* ``late`` (``telemetry.late``): the events as ``events`` encodes them, plus ``arrival``, the
  stream's verdict from the ``rtrl.arrival`` header (``late``: counted in its record; ``expired``:
  in no record); partitioned by the date of ``received_at``.
* ``dlq`` (``telemetry.dlq``): what was rejected, byte for byte (``value`` and ``key`` are binary:
  rejected bytes need not be UTF-8), every header as it came (``headers``, a list of key/value
  pairs), and the reason lifted to text columns. The stream says why in headers (``rtrl.reason``,
  ``rtrl.field``, ``rtrl.detail``, ``rtrl.stage``, ``rtrl.source`` = topic/partition/offset); the
  collector sends no headers but a JSON value ``{"reason", "field", "detail", "raw", ...}``, whose
  fields fill the same columns (``stage`` = ``collector``) when the headers are absent.
  Partitioned by the date of the broker's timestamp.
* ``checkpoints`` (the compacted ``checkpoints`` topic): the key, the JSON value as text, its
  top-level ``checkpoint_id``, ``parent``, ``status`` and ``created_at``, and the broker's
  timestamp; partitioned by the date of that timestamp. A tombstone lands as a row with a null
  value: on a compacted topic it is an announcement too (the checkpoint is withdrawn).

Every table also has ``_partition`` and ``_offset``, the message's place in its topic, which the
marts use to break ties and to trace a row back to Kafka. Tombstones (a null value) and rows of
forgotten users are dropped here, so they never reach a file; except that a null value is data
on ``checkpoints`` (a withdrawal) and on ``dlq`` (what was rejected), and lands there.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import orjson
import polars as pl
import pyarrow as pa
from pyarrow import json as pa_json

from infra.tenancy import scoped_key
from rewards.eventio import EVENT_SCHEMA
from rewards.record import RECORD_SCHEMA
from rewards.tenant_keys import org_scoped
from warehouse.layout import hive_folder

T = TypeVar("T")
Headers = list[tuple[str, bytes | None]] | None  # a message's headers, in order, as Kafka has them

# datasets whose encoding reads more of a message than its offset and value
WITH_METADATA = frozenset({"rollouts", "late", "dlq", "checkpoints"})


@dataclass(frozen=True, slots=True)
class Message:
    """What the sink keeps of one Kafka message."""

    offset: int
    key: bytes | None
    value: bytes | None  # None: a tombstone
    timestamp_ms: int
    headers: Headers = None


@dataclass(frozen=True)
class Batch:
    """Messages of one Kafka partition as columns (cheaper to build than one object each)."""

    offsets: list[int]
    values: list[bytes | None]  # None: a tombstone
    keys: list[bytes | None] | None = None  # the datasets of WITH_METADATA read them ...
    timestamps_ms: list[int] | None = None  # ...
    headers: list[Headers] | None = None  # ...

    @classmethod
    def of(cls, messages: Sequence[Message]) -> Batch:
        return cls([m.offset for m in messages], [m.value for m in messages],
                   [m.key for m in messages], [m.timestamp_ms for m in messages],
                   [m.headers for m in messages])  # fmt: skip

    def live(self) -> Batch:
        """Without tombstones."""
        keep = [i for i, v in enumerate(self.values) if v is not None]
        if len(keep) == len(self.values):
            return self
        pick = lambda col: None if col is None else [col[i] for i in keep]  # noqa: E731
        return Batch([self.offsets[i] for i in keep], [self.values[i] for i in keep],
                     pick(self.keys), pick(self.timestamps_ms), pick(self.headers))  # fmt: skip


@dataclass(frozen=True)
class Forgotten:
    """Users removed by ``rtrl forget``, and the interactions that were theirs.

    ``org_users`` and ``org_interactions`` are (org, id) pairs: a row matches one where its
    organisation and id do, and a row of a dataset without ``org_id`` (rollouts) where its id
    does, since nothing there tells two organisations' same id apart. ``user_ids`` and
    ``interaction_ids`` are bare ids forgotten before ``forget`` took an organisation: they match
    every organisation's.
    """

    user_ids: frozenset[str] = frozenset()
    interaction_ids: frozenset[str] = frozenset()
    org_users: frozenset[tuple[str, str]] = frozenset()
    org_interactions: frozenset[tuple[str, str]] = frozenset()
    orgs: frozenset[str] = frozenset()  # whole organisations: every row of theirs

    def matches(self, columns: Sequence[str]) -> pl.Expr:
        """True for a row (of a frame with these columns) naming a forgotten user or interaction,
        or belonging to a forgotten organisation."""
        hit = pl.lit(False)
        if self.orgs and "org_id" in columns:
            hit = pl.col("org_id").is_in(list(self.orgs)).fill_null(False)
        for column, bare, pairs in (("user_id", self.user_ids, self.org_users),
                                    ("interaction_id", self.interaction_ids,
                                     self.org_interactions)):  # fmt: skip
            if column not in columns:
                continue
            if bare:
                hit = hit | pl.col(column).is_in(list(bare)).fill_null(False)
            if pairs and "org_id" in columns:
                keys = [scoped_key(org, value) for org, value in pairs]
                hit = hit | org_scoped(column, columns).is_in(keys).fill_null(False)
            elif pairs:
                hit = hit | pl.col(column).is_in([value for _, value in pairs]).fill_null(False)
        return hit


_REWARDS_JSON = pl.Schema(
    {name: (pl.String if name in ("t_open", "t_close") else dtype)
     for name, dtype in RECORD_SCHEMA.items()}
)  # fmt: skip
_META = {"_partition": pl.Int32, "_offset": pl.Int64}
_KEEP_TOMBSTONES = frozenset({"dlq", "checkpoints"})  # a null value is data there
_TIMESTAMP = pl.Datetime("us", "UTC")
_HEADERS = pl.List(pl.Struct({"key": pl.String, "value": pl.Binary}))
# stream header -> column; the collector's JSON value has the same fields without the prefix
_DLQ_HEADERS = {"rtrl.reason": "reason", "rtrl.field": "field", "rtrl.detail": "detail",
                "rtrl.stage": "stage"}  # fmt: skip
_Columns = dict[str, pl.DataType | type[pl.DataType]]
_DLQ_COLUMNS: _Columns = {
    "key": pl.Binary, "value": pl.Binary, "headers": _HEADERS,
    **{column: pl.String for column in _DLQ_HEADERS.values()},
    "source_topic": pl.String, "source_partition": pl.String, "source_offset": pl.String,
    "produced_at": _TIMESTAMP,
}  # fmt: skip
_DLQ_SCHEMA = pl.Schema(_DLQ_COLUMNS)
_CHECKPOINTS_COLUMNS: _Columns = {
    "key": pl.String, "value": pl.String, "checkpoint_id": pl.String, "parent": pl.String,
    "status": pl.String, "created_at": pl.String, "produced_at": _TIMESTAMP,
}  # fmt: skip
_CHECKPOINTS_SCHEMA = pl.Schema(_CHECKPOINTS_COLUMNS)


def encode(dataset: str, partition: int, messages: Batch | Sequence[Message],
           forgotten: Forgotten = Forgotten()) -> dict[str, pl.DataFrame]:  # fmt: skip
    """Rows of ``messages`` grouped by hive folder (relative to the warehouse root)."""
    batch = messages if isinstance(messages, Batch) else Batch.of(messages)
    live = batch if dataset in _KEEP_TOMBSTONES else batch.live()
    if not live.values:
        return {}
    keys: tuple[str, ...]
    if dataset == "rewards":
        frame, keys = _rewards(live), ("date", "checkpoint")
    elif dataset == "events":
        frame, keys = _events(live), ("date",)
    elif dataset == "rollouts":
        frame, keys = _rollouts(live), ("date", "checkpoint")
    elif dataset == "late":
        frame, keys = _late(live), ("date",)
    elif dataset == "dlq":
        frame, keys = _dlq(live), ("date",)
    elif dataset == "checkpoints":
        frame, keys = _checkpoints(live), ("date",)
    else:
        raise ValueError(f"unknown dataset {dataset!r}")
    frame = frame.with_columns(
        pl.lit(partition, dtype=pl.Int32).alias("_partition"),
        pl.Series("_offset", live.offsets, dtype=pl.Int64),
    )
    frame = _drop_forgotten(frame, forgotten)
    out: dict[str, pl.DataFrame] = {}
    for values, rows in frame.group_by(list(keys), maintain_order=True):
        folder = hive_folder(dataset, zip(keys, (None if v is None else str(v) for v in values),
                                          strict=True))  # fmt: skip
        out[folder] = rows.drop(list(keys))
    return out


def empty_frame(dataset: str) -> pl.DataFrame:
    """A frame with no rows and exactly the columns :func:`encode` writes for ``dataset``."""
    schema: dict[str, pl.DataType | type[pl.DataType]]
    if dataset == "rewards":
        schema = {**RECORD_SCHEMA}
    elif dataset == "events":
        schema = {**EVENT_SCHEMA}
    elif dataset == "rollouts":
        schema = {"interaction_id": pl.String, "checkpoint_id": pl.String,
                  "produced_at": pl.Datetime("us", "UTC"), "value": pl.String}  # fmt: skip
    elif dataset == "late":
        schema = {**EVENT_SCHEMA, "arrival": pl.String}
    elif dataset == "dlq":
        schema = {**_DLQ_SCHEMA}
    elif dataset == "checkpoints":
        schema = {**_CHECKPOINTS_SCHEMA}
    else:
        raise ValueError(f"unknown dataset {dataset!r}")
    return pl.DataFrame(schema={**schema, **_META})


def _ndjson(batch: Batch, schema: pl.Schema) -> pl.DataFrame:
    """Parse JSON values with Arrow's reader (about twice polars' speed here), one per line."""
    body = b"\n".join(cast(list[bytes], batch.values))  # tombstones are gone
    arrow_schema = pa.schema([pa.field(f.name, _json_type(f.type))
                              for f in pl.DataFrame(schema=schema).to_arrow().schema])  # fmt: skip
    read = pa_json.ReadOptions(use_threads=False, block_size=max(len(body) + 1, 1 << 20))
    for newlines_in_values in (False, True):  # a pretty-printed value needs the slow path
        parse = pa_json.ParseOptions(explicit_schema=arrow_schema,
                                     unexpected_field_behavior="ignore",
                                     newlines_in_values=newlines_in_values)  # fmt: skip
        try:
            table = pa_json.read_json(io.BytesIO(body), read_options=read, parse_options=parse)
            break
        except pa.ArrowInvalid:
            if newlines_in_values:
                raise
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)  # an Arrow table always converts to a frame
    return frame.cast(schema)


def _json_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type the JSON reader can produce for a column polars describes as ``t``."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_list(t) or pa.types.is_list(t) or pa.types.is_list_view(t):
        return pa.list_(_json_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _json_type(f.type)) for f in t])
    return t


def _rewards(messages: Batch) -> pl.DataFrame:
    frame = _ndjson(messages, _REWARDS_JSON).with_columns(
        pl.col(t).str.to_datetime(time_unit="us", time_zone="UTC") for t in ("t_open", "t_close")
    )
    return frame.with_columns(
        pl.col("t_open").dt.date().cast(pl.String).alias("date"),
        pl.col("checkpoint_id").alias("checkpoint"),
    )


def _events(messages: Batch) -> pl.DataFrame:
    frame = _ndjson(messages, EVENT_SCHEMA)
    private = pl.col("privacy_mode").fill_null(False)
    received = pl.col("received_at").str.to_datetime(time_unit="us", time_zone="UTC")
    return frame.with_columns(
        pl.when(private).then(None).otherwise(pl.col("user_id")).alias("user_id"),
        received.dt.date().cast(pl.String).alias("date"),
    )


def _rollouts(messages: Batch) -> pl.DataFrame:
    if messages.keys is None or messages.timestamps_ms is None:
        raise ValueError("rollouts need the messages' keys and timestamps")
    frame = pl.DataFrame(
        {
            "interaction_id": [None if k is None else k.decode() for k in messages.keys],
            "produced_at": [t * 1000 for t in messages.timestamps_ms],
            "value": [v.decode() for v in messages.values if v is not None],
        },
        schema={"interaction_id": pl.String, "produced_at": pl.Int64, "value": pl.String},
    )
    frame = frame.with_columns(
        pl.col("value").str.json_path_match("$.checkpoint_id").alias("checkpoint_id"),
        pl.col("produced_at").cast(pl.Datetime("us", "UTC")),
    ).select("interaction_id", "checkpoint_id", "produced_at", "value")
    return frame.with_columns(
        pl.col("produced_at").dt.date().cast(pl.String).alias("date"),
        pl.col("checkpoint_id").alias("checkpoint"),
    )


def _late(messages: Batch) -> pl.DataFrame:
    frame = _events(messages)
    arrival = [_header(h, "rtrl.arrival") for h in _need(messages.headers, "late", "headers")]
    return frame.with_columns(pl.Series("arrival", arrival, dtype=pl.String))


def _dlq(messages: Batch) -> pl.DataFrame:
    headers = _need(messages.headers, "dlq", "headers")
    rows = []
    for value, hs in zip(messages.values, headers, strict=True):
        lifted = {column: _header(hs, name) for name, column in _DLQ_HEADERS.items()}
        if not hs:  # the collector's record: the reason travels inside the value
            lifted |= _collector_reason(value)
        source = (_header(hs, "rtrl.source") or "").rsplit("/", 2)  # topic names hold no "/"
        rows.append({**lifted, **dict(zip(("source_topic", "source_partition", "source_offset"),
                                         source if len(source) == 3 else (None,) * 3,
                                         strict=True))})  # fmt: skip
    frame = pl.DataFrame(
        {
            "key": _need(messages.keys, "dlq", "keys"),
            "value": messages.values,
            "headers": [[{"key": k, "value": v} for k, v in hs or ()] for hs in headers],
            **{c: [r[c] for r in rows] for c in _DLQ_SCHEMA if c in rows[0]},
            "produced_at": _timestamps(messages, "dlq"),
        },
        schema=_DLQ_SCHEMA,
    )
    return frame.with_columns(pl.col("produced_at").dt.date().cast(pl.String).alias("date"))


def _checkpoints(messages: Batch) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "key": [_text(k) for k in _need(messages.keys, "checkpoints", "keys")],
            "value": [_text(v) for v in messages.values],
            "produced_at": _timestamps(messages, "checkpoints"),
        },
        schema={"key": pl.String, "value": pl.String, "produced_at": _TIMESTAMP},
    )
    # json_path_match gives null for a value that is not JSON: such a row keeps its text
    frame = frame.with_columns(
        pl.col("value").str.json_path_match(f"$.{name}").alias(name)
        for name in ("checkpoint_id", "parent", "status", "created_at")
    ).select(*_CHECKPOINTS_SCHEMA)
    return frame.with_columns(pl.col("produced_at").dt.date().cast(pl.String).alias("date"))


def _need(column: list[T] | None, dataset: str, what: str) -> list[T]:
    if column is None:
        raise ValueError(f"{dataset} needs the messages' {what}")
    return column


def _timestamps(messages: Batch, dataset: str) -> pl.Series:
    ms = _need(messages.timestamps_ms, dataset, "timestamps")
    return pl.Series([t * 1000 for t in ms], dtype=pl.Int64).cast(_TIMESTAMP)


def _header(headers: Headers, name: str) -> str | None:
    """The last value of header ``name`` as text (undecodable bytes replaced), None if absent."""
    found = [v for k, v in headers or () if k == name]
    return _text(found[-1]) if found else None


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def _collector_reason(value: bytes | None) -> dict[str, str | None]:
    """reason, field and detail of a DLQ value the collector wrote (JSON); nothing otherwise."""
    try:
        parsed = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(parsed, dict) or not isinstance(parsed.get("reason"), str):
        return {}
    lifted = {k: v if isinstance(v := parsed.get(k), str) else None
              for k in ("reason", "field", "detail")}  # fmt: skip
    return {**lifted, "stage": "collector"}


def _drop_forgotten(frame: pl.DataFrame, forgotten: Forgotten) -> pl.DataFrame:
    return frame.filter(~forgotten.matches(frame.columns))
