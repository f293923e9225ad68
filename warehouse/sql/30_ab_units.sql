-- ab_units: per experiment arm and user (the unit of randomisation), the sums every A/B metric
-- is a ratio of. A user is (org_id, user_id): two organisations' users of one id are two units. Privacy-mode records carry no user and stay out of experiments' metrics.
-- materialized: table
-- grain: one row per (experiment_name, experiment_arm, org_id, user_id)
-- keys: experiment_name, experiment_arm, org_id, user_id
-- check: SELECT * FROM ab_units WHERE n_scored > n_interactions OR n_dissatisfied > n_followup_known OR kept_sum > n_kept_measured OR invalid_sum < 0 OR calls_sum < 0 OR n_with_calls > n_interactions
CREATE OR REPLACE TABLE ab_units AS
SELECT
    r.experiment_name,
    r.experiment_arm,
    r.org_id,
    r.user_id,
    count(*) AS n_interactions,
    count(r.reward) AS n_scored,
    COALESCE(sum(r.reward), 0.0) AS reward_sum,
    count(r.dissatisfied) AS n_followup_known,
    count(*) FILTER (WHERE r.dissatisfied) AS n_dissatisfied,
    count(o.latency_ms) AS n_completed,
    COALESCE(sum(o.latency_ms), 0) AS latency_sum,
    COALESCE(sum(o.n_kept_measured), 0) AS n_kept_measured,
    COALESCE(sum(o.kept_sum), 0.0) AS kept_sum,
    COALESCE(sum(r.n_invalid_tool_calls), 0) AS invalid_sum,
    COALESCE(sum(r.n_tool_calls), 0) AS calls_sum,
    count(*) FILTER (WHERE r.n_tool_calls > 0) AS n_with_calls
FROM rewards r
LEFT JOIN interaction_outcomes o USING (org_id, interaction_id)
WHERE r.experiment_name IS NOT NULL AND r.user_id IS NOT NULL
GROUP BY ALL;
