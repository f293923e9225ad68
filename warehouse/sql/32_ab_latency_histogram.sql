-- ab_latency_histogram: how many interactions of each arm completed with each latency; the
-- A/B report takes the median and its order-statistic interval from it.
-- materialized: table
-- grain: one row per (experiment_name, experiment_arm, latency_ms)
-- keys: experiment_name, experiment_arm, latency_ms
-- check: SELECT * FROM (SELECT experiment_name, experiment_arm, sum(n) AS n FROM ab_latency_histogram GROUP BY ALL) h JOIN (SELECT experiment_name, experiment_arm, sum(n_completed) AS m FROM ab_units GROUP BY ALL) u USING (experiment_name, experiment_arm) WHERE n <> m
CREATE OR REPLACE TABLE ab_latency_histogram AS
SELECT r.experiment_name, r.experiment_arm, o.latency_ms, count(*) AS n
FROM rewards r
JOIN interaction_outcomes o USING (org_id, interaction_id)
WHERE r.experiment_name IS NOT NULL AND r.user_id IS NOT NULL AND o.latency_ms IS NOT NULL
GROUP BY ALL;
