-- stg_dlq: the dead-letter queue (telemetry.dlq): rejected bytes exactly as they came (raw_value
-- is a BLOB; it need not be UTF-8), every header, and why. The stream says why in headers; the
-- collector inside its JSON value; the sink lifted both to the same columns (warehouse/encode.py).
-- Rename and cast only.
-- materialized: view
-- grain: one row per consumed message of telemetry.dlq
-- keys: kafka_partition, kafka_offset
CREATE OR REPLACE VIEW stg_dlq AS
SELECT
    reason,
    field,
    detail,
    stage,
    source_topic,
    TRY_CAST(source_partition AS INTEGER) AS source_partition,
    TRY_CAST(source_offset AS BIGINT) AS source_offset,
    CAST(produced_at AS TIMESTAMPTZ) AS produced_at,
    key AS raw_key,
    value AS raw_value,
    headers,
    CAST(_partition AS INTEGER) AS kafka_partition,
    CAST(_offset AS BIGINT) AS kafka_offset
FROM {raw_dlq};
