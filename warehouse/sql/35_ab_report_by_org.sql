-- ab_report_by_org: ab_report for each organisation's own users: every arm of an experiment
-- against every other arm, per metric, from that organisation's units of ab_units alone (the
-- same metrics as ab_arms, grouped by org_id too; the same statistics; Holm across every row of
-- one (org_id, experiment, control_arm)). A small organisation's change is its own, never
-- pooled with or shrunk toward the others'. Computed in Python at build time
-- (warehouse/ab_mart.py); this file declares the table. An organisation whose users are all in
-- one arm has no row: its users per arm add up to at most the whole report's.
-- materialized: table
-- grain: one row per (org_id, experiment, control_arm, arm, metric), arm <> control_arm
-- keys: org_id, experiment, control_arm, arm, metric
-- check: SELECT * FROM ab_report_by_org WHERE arm = control_arm OR p_value NOT BETWEEN 0 AND 1 OR ci_low > relative_change OR ci_high < relative_change OR p_holm < p_value
-- check: SELECT * FROM (SELECT experiment, arm, control_arm, metric, sum(n_users) AS users FROM ab_report_by_org GROUP BY ALL) o JOIN ab_report r USING (experiment, arm, control_arm, metric) WHERE o.users > r.n_users
-- Its columns are ab_report's, then org_id.
CREATE OR REPLACE TABLE ab_report_by_org AS
SELECT *, NULL::VARCHAR AS org_id FROM ab_report WHERE false;
