"""Training batches: new rewards per (checkpoint, reward version), gated, then offered.

``build_batches`` takes the rows of the rewards mart that no earlier batch holds, leaves out
privacy-mode interactions and forgotten users, and waits until an interaction can no longer be
revised (``settle_s`` after its window closed: late window + grace). Each (checkpoint, reward
version) slice is one candidate. The quality gate decides:

* passed: its scored rows (with the interaction's rollouts, when any were sunk: the last in
  ``rollout_json``, every call of an agent run in ``trajectory_json``) are written to
  ``_batches/data/<batch_id>.parquet``, the manifest gets a row with ``offered = true``, and
  :func:`publish` announces it on the ``batches`` topic;
* failed: the candidate and its validation report go to ``_quarantine/<batch_id>/``, the manifest
  row says ``offered = false``, and nothing is announced. Its interactions count as used
  (``_batches/claims/``): a quarantined batch is inspected and fixed by hand, never silently
  retried into training.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import orjson
import polars as pl
from confluent_kafka import KafkaError, Message, Producer

from infra.compacted import read_latest
from infra.settings import reliable_producer
from infra.tenancy import scoped_key
from rewards.record import FIELD_NAMES, RECORD_SCHEMA
from warehouse.catalog import build_catalog, connect
from warehouse.layout import BATCHES_DIR, join
from warehouse.manifest import (
    BATCH_DATA_SCHEMA,
    FAILED,
    PASSED,
    BatchEntry,
    batch_id,
    data_file,
    manifest_file,
    report_file,
)
from warehouse.privacy import load_forgotten
from warehouse.quality import validate
from warehouse.settings import BuildConfig
from warehouse.store import Store

log = logging.getLogger(__name__)

# Every interaction a batch took (scored or not, offered or quarantined), one file per batch.
CLAIMS_DIR = join(BATCHES_DIR, "claims")


def _claims_sql(store: Store) -> str:
    """Every claimed interaction as (org_id, interaction_id). A claim written before claims held
    the organisation has a null org_id, and still claims that id for every organisation."""
    empty = "SELECT NULL::VARCHAR AS org_id, NULL::VARCHAR AS interaction_id WHERE false"
    if next(store.files(CLAIMS_DIR), None) is None:
        return empty
    files = store.url(join(CLAIMS_DIR, "*.parquet"))
    return (
        f"SELECT * FROM ({empty}) "
        f"UNION ALL BY NAME SELECT * FROM read_parquet('{files}', union_by_name = true)"
    )


def _candidates(store: Store, db: str, now: datetime, settle_s: int) -> pl.DataFrame:
    forgotten = load_forgotten(store)
    forgotten_users = sorted(forgotten.user_ids)
    forgotten_keys = sorted(scoped_key(org, user) for org, user in forgotten.org_users)
    con = connect(store, db, read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        frame = con.sql(
            f"""
            SELECT r.* EXCLUDE (reward_date),
                   epoch($now::TIMESTAMPTZ) - epoch(r.t_close) AS age_s,
                   ro.rollout_json, ro.trajectory_json
            FROM rewards r
            LEFT JOIN (SELECT COALESCE(s.org_id, o.org_id) AS org_id, s.interaction_id,
                              arg_max(rollout_json, kafka_offset) AS rollout_json,
                              list(rollout_json ORDER BY kafka_partition, kafka_offset)
                                  AS trajectory_json
                       FROM stg_rollouts s
                       -- a rollout written before rollouts carried org_id belongs to the one
                       -- organisation whose rewards use its id; one two use joins neither
                       LEFT JOIN (SELECT interaction_id, any_value(org_id) AS org_id
                                  FROM rewards GROUP BY interaction_id
                                  HAVING count(DISTINCT org_id) = 1) o
                         ON s.org_id IS NULL AND o.interaction_id = s.interaction_id
                       GROUP BY ALL) ro
              ON ro.interaction_id = r.interaction_id AND ro.org_id IS NOT DISTINCT FROM r.org_id
            WHERE COALESCE(r.censor_reason, '') <> 'privacy_mode'
              AND r.t_close + to_seconds($settle) <= $now::TIMESTAMPTZ
              AND NOT EXISTS (SELECT 1 FROM ({_claims_sql(store)}) c
                              WHERE c.interaction_id = r.interaction_id
                                AND (c.org_id IS NULL OR c.org_id = r.org_id))
              AND NOT list_contains($forgotten, COALESCE(r.user_id, ''))
              AND NOT list_contains($forgotten_orgs, COALESCE(r.org_id, ''))
              AND NOT list_contains($forgotten_keys, length(COALESCE(r.org_id, ''))::VARCHAR
                                    || ':' || COALESCE(r.org_id, '') || '/'
                                    || COALESCE(r.user_id, ''))
            ORDER BY r.checkpoint_id, r.reward_version, r.org_id, r.interaction_id
            """,
            params={
                "now": now,
                "settle": settle_s,
                "forgotten": forgotten_users,
                "forgotten_keys": forgotten_keys,
                "forgotten_orgs": sorted(forgotten.orgs),
            },
        ).to_arrow_table()
    finally:
        con.close()
    candidates = pl.from_arrow(frame)
    assert isinstance(candidates, pl.DataFrame)  # an Arrow table always converts to a frame
    return candidates


def build_batches(
    store: Store,
    config: BuildConfig = BuildConfig(),  # noqa: B008 - frozen: one shared default is safe
    db: str | None = None,
    now: datetime | None = None,
) -> list[BatchEntry]:
    """Build, gate and record every batch that is due; returns their manifest entries."""
    now = now or datetime.now(UTC)
    db = build_catalog(store, db)
    candidates = _candidates(store, db, now, config.settle_s)
    entries = []
    for (checkpoint, version), rows in candidates.group_by(
            ["checkpoint_id", "reward_version"], maintain_order=True):  # fmt: skip
        if rows.height < config.min_rows:
            continue
        entries.append(_gate_one(store, config, rows, str(checkpoint), str(version), now))
    if entries:
        build_catalog(store, db)  # the manifest and lineage views now have files to read
    return entries


def _gate_one(store: Store, config: BuildConfig, rows: pl.DataFrame, checkpoint: str,
              version: str, now: datetime) -> BatchEntry:  # fmt: skip
    candidate = rows.select([*FIELD_NAMES, "age_s"]).cast(RECORD_SCHEMA)
    passed, report = validate(candidate, config.quality)
    quality = PASSED if passed else FAILED
    interactions = rows.select(  # an interaction is (org_id, interaction_id)
        pl.concat_str(pl.col("org_id").fill_null(""), "interaction_id", separator="\x00")
    )
    bid = batch_id(checkpoint, version, interactions.to_series().to_list(), now)
    if passed:
        data = rows.filter(pl.col("status") == "scored")
    else:
        data = rows  # the whole candidate, for whoever inspects the quarantine
    data = data.with_columns(pl.lit(bid).alias("batch_id")).select(BATCH_DATA_SCHEMA.names())
    data = data.cast(BATCH_DATA_SCHEMA)
    files = (data_file(bid, quality),)
    store.write_parquet(files[0], data)
    store.write_bytes(report_file(bid, quality), orjson.dumps(report, default=str))
    entry = BatchEntry(bid, checkpoint, version, data.height, files, quality, passed, now)
    store.write_parquet(join(CLAIMS_DIR, f"{bid}.parquet"), rows.select("org_id", "interaction_id"))
    store.write_parquet(manifest_file(bid), entry.to_frame())
    log.info("batch %s: %s, %d rows", bid, quality, data.height)
    return entry


def publish(bootstrap: str, topic: str, entries: list[BatchEntry]) -> int:
    """Announce the offered batches on the (compacted) batches topic, keyed by batch id."""
    producer = Producer(reliable_producer(bootstrap))
    errors: list[object] = []
    offered = [e for e in entries if e.offered]

    def note_error(err: KafkaError | None, _msg: Message) -> None:
        if err:
            errors.append(err)

    for e in offered:
        producer.produce(topic, key=e.batch_id.encode(), value=orjson.dumps(e.to_json_dict()),
                         on_delivery=note_error)  # fmt: skip
    left = producer.flush(30)
    if left or errors:
        raise RuntimeError(f"batch announcements failed: {left} unsent, errors {errors[:3]}")
    return len(offered)


def announce_missing(bootstrap: str, topic: str, store: Store) -> list[str]:
    """Announce every offered batch the topic does not hold yet; return their ids.

    A batch is recorded first and announced second, so a build whose announcement failed (Kafka
    unreachable) leaves an offered batch no trainer hears of; the next build catches up. An
    announcement is idempotent (a batch's entry never changes; the topic is compacted by id).
    """
    held = read_latest(bootstrap, topic)
    missing = [e for e in list_batches(store, offered_only=True) if e.batch_id.encode() not in held]
    publish(bootstrap, topic, missing)
    for e in missing:
        log.info("announced %s on %s", e.batch_id, topic)
    return [e.batch_id for e in missing]


def list_batches(store: Store, offered_only: bool = False) -> list[BatchEntry]:
    """The manifest, oldest first; ``offered_only`` gives what a trainer may read."""
    files = list(store.files(join(BATCHES_DIR, "manifest")))
    if not files:
        return []
    frame = pl.concat([store.read_parquet(f) for f in files]).sort("created_at", "batch_id")
    if offered_only:
        frame = frame.filter(pl.col("offered"))
    return [BatchEntry(**{**row, "files": tuple(row["files"])}) for row in frame.to_dicts()]
