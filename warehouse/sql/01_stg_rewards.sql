-- stg_rewards: the reward records as the sink landed them. Rename and cast only.
-- materialized: view
-- grain: one row per consumed message of the rewards topic (revisions and redeliveries included)
-- keys: kafka_partition, kafka_offset
-- check: SELECT * FROM stg_rewards WHERE interaction_id IS NULL OR revision < 0
CREATE OR REPLACE VIEW stg_rewards AS
SELECT
    interaction_id,
    CAST(revision AS BIGINT) AS revision,
    reward_version,
    status,
    censor_reason,
    reward, r_edit, r_followup, r_tool, r_clarify, r_latency,
    org_id, user_id, session_id, checkpoint_id,
    experiment_name, experiment_arm,
    CAST(t_open AS TIMESTAMPTZ) AS t_open,
    CAST(t_close AS TIMESTAMPTZ) AS t_close,
    CAST(timezone('UTC', CAST(t_open AS TIMESTAMPTZ)) AS DATE) AS reward_date,  -- the UTC date, whatever the session's time zone
    n_events, n_duplicates, n_late, n_orphans, n_edits, n_accepted, n_rejected, n_reverted,
    n_tool_calls, n_invalid_tool_calls, n_clarifying, n_subagents, n_subagents_unused,
    dissatisfied,
    event_ids,
    CAST(_partition AS INTEGER) AS kafka_partition,
    CAST(_offset AS BIGINT) AS kafka_offset
FROM {raw_rewards};
