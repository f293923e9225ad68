-- interaction_outcomes: what the raw events say about each interaction beyond its reward record:
-- the latency of its last completion and how much of each accepted edit is still in the codebase.
-- In-window events are the first copy of each event_id received in [t_open, t_close) of the
-- interaction's record, ordered by (ts, event_id), exactly as the reward function reads them.
-- An accepted edit is kept 0.0 if an edit.reverted follows its acceptance, else the
-- retained_fraction of its last edit.retention, and unmeasured (NULL) when it has neither.
-- materialized: table
-- grain: one row per interaction (org_id, interaction_id) of the rewards mart outside privacy mode
-- keys: org_id, interaction_id
-- check: SELECT * FROM interaction_outcomes WHERE n_kept_measured > n_accepted_edits OR kept_sum > n_kept_measured OR kept_sum < 0
-- check: SELECT * FROM interaction_outcomes o JOIN rewards r USING (org_id, interaction_id) WHERE o.n_accepted_edits <> r.n_accepted
CREATE OR REPLACE TABLE interaction_outcomes AS
WITH first_copies AS (
    SELECT * FROM stg_events
    QUALIFY row_number() OVER (
        PARTITION BY org_id, interaction_id, event_id ORDER BY received_at, kafka_partition, kafka_offset
    ) = 1
),
in_window AS (
    SELECT e.*
    FROM first_copies e
    JOIN rewards r USING (org_id, interaction_id)
    WHERE e.received_at < r.t_close AND COALESCE(r.censor_reason, '') <> 'privacy_mode'
),
proposed AS (
    SELECT DISTINCT org_id, interaction_id, edit_id FROM in_window WHERE event_type = 'agent.edit_proposed'
),
per_edit AS (
    SELECT
        p.org_id,
        p.interaction_id,
        p.edit_id,
        arg_max(w.event_type, {'ts': w.ts, 'id': w.event_id})
            FILTER (WHERE w.event_type IN ('edit.accepted', 'edit.rejected')) AS decision,
        max({'ts': w.ts, 'id': w.event_id})
            FILTER (WHERE w.event_type IN ('edit.accepted', 'edit.rejected')) AS decided_at,
        max({'ts': w.ts, 'id': w.event_id})
            FILTER (WHERE w.event_type = 'edit.reverted') AS last_revert,
        arg_max(w.retained_fraction, {'ts': w.ts, 'id': w.event_id})
            FILTER (WHERE w.event_type = 'edit.retention') AS retained
    FROM proposed p
    JOIN in_window w
      ON w.org_id = p.org_id AND w.interaction_id = p.interaction_id AND w.edit_id = p.edit_id
    GROUP BY ALL
),
kept AS (
    SELECT
        org_id,
        interaction_id,
        CASE WHEN last_revert > decided_at THEN 0.0 ELSE retained END AS kept
    FROM per_edit
    WHERE decision = 'edit.accepted'
),
latency AS (
    SELECT org_id, interaction_id, arg_max(latency_ms, {'ts': ts, 'id': event_id}) AS latency_ms
    FROM in_window
    WHERE event_type = 'interaction.completed'
    GROUP BY ALL
)
SELECT
    r.org_id,
    r.interaction_id,
    l.latency_ms,
    COALESCE(k.n_accepted_edits, 0) AS n_accepted_edits,
    COALESCE(k.n_kept_measured, 0) AS n_kept_measured,
    COALESCE(k.kept_sum, 0.0) AS kept_sum
FROM rewards r
LEFT JOIN latency l USING (org_id, interaction_id)
LEFT JOIN (
    SELECT org_id, interaction_id, count(*) AS n_accepted_edits, count(kept) AS n_kept_measured,
           COALESCE(sum(kept), 0.0) AS kept_sum
    FROM kept GROUP BY ALL
) k USING (org_id, interaction_id)
WHERE COALESCE(r.censor_reason, '') <> 'privacy_mode';
