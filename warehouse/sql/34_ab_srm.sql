-- ab_srm: the sample-ratio-mismatch check of each experiment: its users per arm against the
-- expected shares, Pearson's chi-square, its p-value, and the flag at p < alpha = 0.001.
-- expected_share: a canary's experiment (named with its share by its candidate's announcement,
-- the checkpoints mart) against that share; any other against EQUAL SHARES, since events and
-- rollouts carry an experiment's name and arm only; `rtrl report ab --weights A=90,B=10` tests
-- the same counts against a configuration.
-- Computed in Python at build time (warehouse/ab_mart.py, warehouse/ab.py); experiments with a
-- single arm have no split to check and no row.
-- materialized: table
-- grain: one row per (experiment, arm)
-- keys: experiment, arm
-- check: SELECT * FROM ab_srm WHERE p_value NOT BETWEEN 0 AND 1 OR chi2 < 0 OR srm <> (p_value < alpha)
-- check: SELECT * FROM (SELECT experiment, sum(expected_share) AS s, count(*) - 1 AS arms_less_one, min(df) AS df FROM ab_srm GROUP BY ALL) WHERE abs(s - 1) > 1e-9 OR df <> arms_less_one
-- check: SELECT * FROM ab_srm s JOIN ab_arms a ON a.experiment_name = s.experiment AND a.experiment_arm = s.arm WHERE s.observed <> a.n_users
CREATE OR REPLACE TABLE ab_srm (
    experiment VARCHAR,
    arm VARCHAR,
    observed BIGINT,  -- users seen in the arm (the unit of randomisation)
    expected_share DOUBLE,
    chi2 DOUBLE,  -- the experiment's, on each of its rows
    df INTEGER,
    p_value DOUBLE,
    alpha DOUBLE,
    srm BOOLEAN
);
