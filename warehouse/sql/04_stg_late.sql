-- stg_late: the archive of telemetry.late, the events that arrived after their interaction's
-- window, lifted to columns as stg_events does, with the stream's verdict on each.
-- Rename and cast only.
-- materialized: view
-- grain: one row per consumed message of telemetry.late
-- keys: kafka_partition, kafka_offset
-- check: SELECT * FROM stg_late WHERE event_id IS NULL OR received_at IS NULL
CREATE OR REPLACE VIEW stg_late AS
SELECT
    event_id,
    type AS event_type,
    CAST(ts AS TIMESTAMPTZ) AS ts,
    CAST(received_at AS TIMESTAMPTZ) AS received_at,
    interaction_id, session_id, user_id, org_id, checkpoint_id,
    experiment.name AS experiment_name,
    experiment.arm AS experiment_arm,
    COALESCE(privacy_mode, FALSE) AS privacy_mode,
    arrival,  -- 'late': counted in its record's n_late; 'expired': in no record (reward spec)
    CAST(_partition AS INTEGER) AS kafka_partition,
    CAST(_offset AS BIGINT) AS kafka_offset
FROM {raw_late};
