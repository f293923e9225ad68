-- stg_rollouts: what the serving side generated, the value kept as JSON text.
-- materialized: view
-- grain: one row per consumed message of the rollouts topic
-- keys: kafka_partition, kafka_offset
CREATE OR REPLACE VIEW stg_rollouts AS
SELECT
    -- the organisation of the API key that asked (null in rollouts written before tenancy)
    json_extract_string(value, '$.org_id') AS org_id,
    interaction_id,
    checkpoint_id,
    CAST(produced_at AS TIMESTAMPTZ) AS produced_at,
    value AS rollout_json,
    CAST(_partition AS INTEGER) AS kafka_partition,
    CAST(_offset AS BIGINT) AS kafka_offset
FROM {raw_rollouts};
