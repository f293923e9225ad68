-- stg_checkpoints: every announcement on the compacted checkpoints topic, keyed by checkpoint_id.
-- A tombstone (null value) withdraws its key; a value that is not JSON keeps its text but no
-- checkpoint_json. Rename and cast only.
-- materialized: view
-- grain: one row per consumed message of the checkpoints topic (re-announcements included)
-- keys: kafka_partition, kafka_offset
CREATE OR REPLACE VIEW stg_checkpoints AS
SELECT
    key AS checkpoint_key,
    checkpoint_id,
    parent,
    status,
    TRY_CAST(created_at AS TIMESTAMPTZ) AS created_at,
    value IS NULL AS tombstone,
    value AS checkpoint_text,
    CASE WHEN json_valid(value) THEN CAST(value AS JSON) END AS checkpoint_json,
    CAST(produced_at AS TIMESTAMPTZ) AS announced_at,
    CAST(_partition AS INTEGER) AS kafka_partition,
    CAST(_offset AS BIGINT) AS kafka_offset
FROM {raw_checkpoints};
