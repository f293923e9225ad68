-- lineage: from a checkpoint to the batches made of its interactions, the reward version that
-- scored them, and the raw events (event_ids, in order) each reward was computed from.
-- Only offered batches are in it: a quarantined batch never reaches a trainer.
-- materialized: view
-- grain: one row per (batch_id, org_id, interaction_id)
-- keys: batch_id, org_id, interaction_id
-- check: SELECT * FROM lineage l LEFT JOIN batches b USING (batch_id) WHERE b.batch_id IS NULL OR NOT b.offered OR b.checkpoint_id <> l.checkpoint_id
CREATE OR REPLACE VIEW lineage AS
SELECT
    checkpoint_id,
    batch_id,
    reward_version,
    org_id,
    interaction_id,
    revision,
    event_ids
FROM {batch_data};
