-- ab_report: every arm of an experiment against every other arm as its control, per metric: the
-- relative change, its 95 % interval and the two-sided p-value of "no change", exactly as
-- `rtrl report ab` prints them. Computed in Python at build time (warehouse/ab_mart.py, statistics
-- in warehouse/ab.py) from ab_arms and ab_latency_histogram; this file declares the table.
-- n_users and n_interactions are those of `arm`; control and value are the metric in each arm.
-- p_holm: p_value adjusted by Holm across every row of the same (experiment, control_arm), all
-- arms and metrics. seq_*: the anytime-valid 95 % interval and p-value (a confidence sequence
-- over the users of both arms, N* 5,000; stats/sequential.py), valid at every refresh at once;
-- seq_p_holm: seq_p_value adjusted the same way.
-- materialized: table
-- grain: one row per (experiment, control_arm, arm, metric), arm <> control_arm
-- keys: experiment, control_arm, arm, metric
-- check: SELECT * FROM ab_report WHERE arm = control_arm OR p_value NOT BETWEEN 0 AND 1 OR ci_low > relative_change OR ci_high < relative_change
-- check: SELECT * FROM ab_report WHERE p_holm < p_value OR p_holm > 1 OR seq_p_holm < seq_p_value OR seq_ci_low > ci_low OR seq_ci_high < ci_high OR seq_p_value < p_value
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
    p_value DOUBLE,
    p_holm DOUBLE,
    seq_ci_low DOUBLE,
    seq_ci_high DOUBLE,
    seq_p_value DOUBLE,
    seq_p_holm DOUBLE
);
