-- batches: the manifest of training batches, offered and quarantined.
-- materialized: view
-- grain: one row per batch_id
-- keys: batch_id
-- check: SELECT * FROM batches WHERE quality NOT IN ('passed', 'failed') OR (quality = 'passed') <> offered
CREATE OR REPLACE VIEW batches AS
SELECT
    batch_id, checkpoint_id, reward_version, n_rows, files, quality, offered,
    CAST(created_at AS TIMESTAMPTZ) AS created_at
FROM {batch_manifest};
