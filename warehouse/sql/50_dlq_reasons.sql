-- dlq_reasons: how much the platform rejected, and why, day by day (UTC date of the broker's
-- timestamp of the DLQ record, i.e. when it was rejected). A message counts once by its place in
-- Kafka, even when a crash left a second copy for a reader to see before the sink restarted.
-- materialized: table
-- grain: one row per (dlq_date, reason, stage)
-- keys: dlq_date, reason, stage
-- check: SELECT * FROM (SELECT sum(n_records) AS n FROM dlq_reasons) WHERE n <> (SELECT count(*) FROM (SELECT DISTINCT kafka_partition, kafka_offset FROM stg_dlq))
CREATE OR REPLACE TABLE dlq_reasons AS
WITH once AS (
    SELECT DISTINCT ON (kafka_partition, kafka_offset) * FROM stg_dlq
)
SELECT
    CAST(timezone('UTC', produced_at) AS DATE) AS dlq_date,
    COALESCE(reason, '(none)') AS reason,  -- a record that says nothing about why
    COALESCE(stage, '(none)') AS stage,  -- 'stream' or 'collector'
    count(*) AS n_records
FROM once
GROUP BY ALL;
