-- ab_arms: each arm's metrics as ratios of per-user sums, with the moments the delta method
-- needs (warehouse/ab.py): for a metric y/x, sum_x, sum_y, sum_xx, sum_yy, sum_xy over users.
-- materialized: view
-- grain: one row per (experiment_name, experiment_arm)
-- keys: experiment_name, experiment_arm
-- check: SELECT * FROM ab_arms WHERE kept_share NOT BETWEEN 0 AND 1 OR dissatisfied_rate NOT BETWEEN 0 AND 1 OR kept_per_interaction < 0 OR invalid_tool_calls_per_interaction < 0 OR tool_calls_per_interaction < 0 OR tool_call_share NOT BETWEEN 0 AND 1
CREATE OR REPLACE VIEW ab_arms AS
SELECT
    experiment_name,
    experiment_arm,
    count(*) AS n_users,
    sum(n_interactions) AS n_interactions,
    sum(kept_sum) / NULLIF(sum(n_kept_measured), 0) AS kept_share,
    sum(kept_sum) / NULLIF(sum(n_interactions), 0) AS kept_per_interaction,
    sum(n_dissatisfied) / NULLIF(sum(n_followup_known), 0) AS dissatisfied_rate,
    sum(latency_sum) / NULLIF(sum(n_completed), 0) AS latency_mean_ms,
    sum(reward_sum) / NULLIF(sum(n_scored), 0) AS mean_reward,
    sum(invalid_sum) / NULLIF(sum(n_interactions), 0) AS invalid_tool_calls_per_interaction,
    sum(calls_sum) / NULLIF(sum(n_interactions), 0) AS tool_calls_per_interaction,
    sum(n_with_calls) / NULLIF(sum(n_interactions), 0) AS tool_call_share,
    -- kept share: y = kept_sum, x = n_kept_measured
    sum(n_kept_measured) AS kept_x, sum(kept_sum) AS kept_y,
    sum(n_kept_measured * n_kept_measured) AS kept_xx, sum(kept_sum * kept_sum) AS kept_yy,
    sum(n_kept_measured * kept_sum) AS kept_xy,
    -- edits kept per interaction: y = kept_sum, x = n_interactions
    sum(n_interactions) AS keptn_x, sum(kept_sum) AS keptn_y,
    sum(n_interactions * n_interactions) AS keptn_xx,
    sum(kept_sum * kept_sum) AS keptn_yy,
    sum(n_interactions * kept_sum) AS keptn_xy,
    -- dissatisfied follow-up rate: y = n_dissatisfied, x = n_followup_known
    sum(n_followup_known) AS dissat_x, sum(n_dissatisfied) AS dissat_y,
    sum(n_followup_known * n_followup_known) AS dissat_xx,
    sum(n_dissatisfied * n_dissatisfied) AS dissat_yy,
    sum(n_followup_known * n_dissatisfied) AS dissat_xy,
    -- latency: y = latency_sum, x = n_completed
    sum(n_completed) AS latency_x, sum(latency_sum) AS latency_y,
    sum(n_completed * n_completed) AS latency_xx,
    sum(CAST(latency_sum AS DOUBLE) * latency_sum) AS latency_yy,
    sum(CAST(n_completed AS DOUBLE) * latency_sum) AS latency_xy,
    -- reward: y = reward_sum, x = n_scored
    sum(n_scored) AS reward_x, sum(reward_sum) AS reward_y,
    sum(n_scored * n_scored) AS reward_xx, sum(reward_sum * reward_sum) AS reward_yy,
    sum(n_scored * reward_sum) AS reward_xy,
    -- invalid tool calls per interaction: y = invalid_sum, x = n_interactions
    sum(n_interactions) AS invalid_x, sum(invalid_sum) AS invalid_y,
    sum(n_interactions * n_interactions) AS invalid_xx,
    sum(CAST(invalid_sum AS DOUBLE) * invalid_sum) AS invalid_yy,
    sum(CAST(n_interactions AS DOUBLE) * invalid_sum) AS invalid_xy,
    -- tool calls per interaction: y = calls_sum, x = n_interactions
    sum(n_interactions) AS calls_x, sum(calls_sum) AS calls_y,
    sum(n_interactions * n_interactions) AS calls_xx,
    sum(CAST(calls_sum AS DOUBLE) * calls_sum) AS calls_yy,
    sum(CAST(n_interactions AS DOUBLE) * calls_sum) AS calls_xy,
    -- interactions with a tool call: y = n_with_calls, x = n_interactions
    sum(n_interactions) AS withcalls_x, sum(n_with_calls) AS withcalls_y,
    sum(n_interactions * n_interactions) AS withcalls_xx,
    sum(CAST(n_with_calls AS DOUBLE) * n_with_calls) AS withcalls_yy,
    sum(CAST(n_interactions AS DOUBLE) * n_with_calls) AS withcalls_xy
FROM ab_units
GROUP BY ALL;
