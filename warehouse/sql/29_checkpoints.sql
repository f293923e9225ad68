-- checkpoints: what the registry announced about each checkpoint, as of its latest announcement
-- (the largest offset of its key: a re-announcement replaces the earlier value, a tombstone
-- withdraws the checkpoint). Decision figures come from evals.gate (trainer/gate.py), else from
-- evals.offpolicy; the canary keys (evals.canary.outcome: NULL, 'rolled_out' or 'rolled_back';
-- percent; experiment) are absent from older checkpoints and NULL then.
-- materialized: table
-- grain: one row per checkpoint_id announced and not withdrawn
-- keys: checkpoint_id
-- check: SELECT * FROM checkpoints WHERE announced_id IS DISTINCT FROM checkpoint_id
-- check: SELECT * FROM checkpoints WHERE status NOT IN ('promoted', 'rejected', 'canary') OR (status = 'rejected') <> (len(reasons) > 0)
-- check: SELECT * FROM checkpoints WHERE canary_outcome NOT IN ('rolled_out', 'rolled_back')
CREATE OR REPLACE TABLE checkpoints AS
WITH latest AS (
    SELECT checkpoint_key, arg_max(
        {'tombstone': tombstone, 'json': checkpoint_json, 'at': announced_at},
        {'partition': kafka_partition, 'offset': kafka_offset}) AS a
    FROM stg_checkpoints
    WHERE checkpoint_key IS NOT NULL
    GROUP BY ALL
),
live AS (
    SELECT checkpoint_key, a.json AS j, a.at AS announced_at FROM latest WHERE NOT a.tombstone
),
figures AS (
    SELECT
        checkpoint_key,
        announced_at,
        j,
        j -> '$.evals.gate' AS gate,
        j -> '$.evals.offpolicy' AS offpolicy
    FROM live
)
SELECT
    checkpoint_key AS checkpoint_id,
    j ->> '$.checkpoint_id' AS announced_id,
    j ->> '$.parent' AS parent,
    j ->> '$.status' AS status,
    TRY_CAST(j ->> '$.created_at' AS TIMESTAMPTZ) AS created_at,
    COALESCE(CAST(j -> '$.reasons' AS VARCHAR[]), []) AS reasons,
    COALESCE(TRY_CAST(gate ->> '$.gain' AS DOUBLE),
             TRY_CAST(offpolicy ->> '$.value' AS DOUBLE)
             - TRY_CAST(offpolicy ->> '$.behaviour_mean' AS DOUBLE)) AS gain,
    COALESCE(TRY_CAST(gate ->> '$.lower' AS DOUBLE),
             TRY_CAST(offpolicy ->> '$.lower' AS DOUBLE)) AS lower,
    COALESCE(TRY_CAST(gate ->> '$.level' AS DOUBLE),
             TRY_CAST(offpolicy ->> '$.level' AS DOUBLE)) AS level,
    COALESCE(gate ->> '$.method', offpolicy ->> '$.method') AS method,
    CAST(COALESCE(TRY_CAST(gate ->> '$.n' AS DOUBLE),
                  TRY_CAST(offpolicy ->> '$.n' AS DOUBLE)) AS BIGINT) AS n,
    COALESCE(TRY_CAST(gate ->> '$.ess' AS DOUBLE),
             TRY_CAST(offpolicy ->> '$.ess' AS DOUBLE)) AS ess,
    COALESCE(TRY_CAST(gate ->> '$.kl' AS DOUBLE),
             TRY_CAST(offpolicy ->> '$.kl' AS DOUBLE)) AS kl,
    CAST(COALESCE(TRY_CAST(gate ->> '$.alarms' AS DOUBLE),
                  json_array_length(j, '$.evals.alarms')) AS BIGINT) AS alarms,
    CAST(TRY_CAST(gate ->> '$.eval_alarms' AS DOUBLE) AS BIGINT) AS eval_alarms,
    j ->> '$.evals.canary.outcome' AS canary_outcome,
    TRY_CAST(j ->> '$.evals.canary.percent' AS DOUBLE) AS canary_percent,
    j ->> '$.evals.canary.experiment' AS canary_experiment,
    COALESCE(json_array_length(j, '$.batches'), 0) AS n_batches,
    announced_at
FROM figures;
