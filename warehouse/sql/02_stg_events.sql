-- stg_events: the raw archive of telemetry.events, payload fields lifted to columns.
-- Rename and cast only (timestamps from RFC 3339 text to TIMESTAMPTZ).
-- materialized: view
-- grain: one row per archived copy of an event (retried copies are separate rows)
-- keys: kafka_partition, kafka_offset
-- check: SELECT * FROM stg_events WHERE event_id IS NULL OR received_at IS NULL
CREATE OR REPLACE VIEW stg_events AS
SELECT
    event_id,
    type AS event_type,
    CAST(ts AS TIMESTAMPTZ) AS ts,
    CAST(received_at AS TIMESTAMPTZ) AS received_at,
    interaction_id, session_id, user_id, org_id, checkpoint_id,
    experiment.name AS experiment_name,
    experiment.arm AS experiment_arm,
    COALESCE(privacy_mode, FALSE) AS privacy_mode,
    payload.edit_id AS edit_id,
    payload.valid AS tool_call_valid,
    payload.retained_fraction AS retained_fraction,
    payload.after_s AS retention_after_s,
    payload.dissatisfied AS dissatisfied,
    payload.latency_ms AS latency_ms,
    payload.output_tokens AS output_tokens,
    CAST(_partition AS INTEGER) AS kafka_partition,
    CAST(_offset AS BIGINT) AS kafka_offset
FROM {raw_events};
