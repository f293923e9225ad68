-- rewards_daily_by_checkpoint: how each checkpoint did, day by day (UTC date of t_open).
-- materialized: table (dashboards read it often; it is rebuilt with the rewards mart)
-- grain: one row per (reward_date, checkpoint_id, reward_version)
-- keys: reward_date, checkpoint_id, reward_version
-- invariants: n_scored + n_censored = n_interactions; the interactions sum to the rewards mart's rows.
-- check: SELECT * FROM rewards_daily_by_checkpoint WHERE n_scored + n_censored <> n_interactions
-- check: SELECT * FROM (SELECT sum(n_interactions) AS n FROM rewards_daily_by_checkpoint) WHERE n <> (SELECT count(*) FROM rewards)
CREATE OR REPLACE TABLE rewards_daily_by_checkpoint AS
SELECT
    reward_date,
    checkpoint_id,
    reward_version,
    count(*) AS n_interactions,
    count(*) FILTER (WHERE status = 'scored') AS n_scored,
    count(*) FILTER (WHERE status = 'censored') AS n_censored,
    count(*) FILTER (WHERE status = 'censored') / count(*) AS censored_share,
    avg(reward) AS mean_reward,
    avg(r_edit) AS mean_r_edit,
    avg(r_followup) AS mean_r_followup,
    avg(r_tool) AS mean_r_tool,
    avg(r_clarify) AS mean_r_clarify,
    avg(r_latency) AS mean_r_latency
FROM rewards
GROUP BY ALL;
