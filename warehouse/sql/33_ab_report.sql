-- ab_report: every arm of an experiment against every other arm as its control, per metric: the
-- relative change, its 95 % interval and the two-sided p-value of "no change", exactly as
-- `rtrl report ab` prints them. Computed in Python at build time (warehouse/ab_mart.py, statistics
-- in warehouse/ab.py) from ab_arms and ab_latency_histogram; this file declares the table.
-- n_users and n_interactions are those of `arm`; control and value are the metric in each arm.
-- materialized: table
-- grain: one row per (experiment, control_arm, arm, metric), arm <> control_arm
-- keys: experiment, control_arm, arm, metric
-- check: SELECT * FROM ab_report WHERE arm = control_arm OR p_value NOT BETWEEN 0 AND 1 OR ci_low > relative_change OR ci_high < relative_change
-- check: SELECT * FROM ab_report r JOIN ab_arms a ON a.experiment_name = r.experiment AND a.experiment_arm = r.arm WHERE r.n_users <> a.n_users OR r.n_interactions <> a.n_interactions
CREATE OR REPLACE TABLE ab_report (
    experiment VARCHAR,
    arm VARCHAR,
    control_arm VARCHAR,
    metric VARCHAR,
    metric_order INTEGER,  -- the report's order of metrics
    n_users BIGINT,
    n_interactions BIGINT,
    control DOUBLE,
    value DOUBLE,
    relative_change DOUBLE,
    ci_low DOUBLE,
    ci_high DOUBLE,
    p_value DOUBLE
);
