-- stg_turns: each chat call's place in its agent run, read from its rollout's turn
-- (models/rollout.py, docs/contracts/events-v1.md "Agent runs"): the calls of one interaction
-- form a tree by parent_call_id; segment numbers the chains of calls that extend one another
-- token for token; the first prefix_len prompt ids are the parent's prompt and completion (the
-- rest of the prompt is the environment's: tool results, user turns); broken_calls counts the
-- answer's tool calls the gateway could not read (0 in rollouts written before it). Rollouts
-- without a turn (completions, older rollouts) have no row here.
-- materialized: view
-- grain: one row per consumed rollouts message with a turn (a message delivered twice: two rows of one call_id)
-- keys: kafka_partition, kafka_offset
-- check: SELECT * FROM stg_turns WHERE call_id IS NULL OR segment < 0 OR prefix_len < 0 OR broken_calls < 0 OR prefix_len > prompt_tokens
CREATE OR REPLACE VIEW stg_turns AS
SELECT
    interaction_id,
    checkpoint_id,
    t ->> '$.call_id' AS call_id,
    t ->> '$.parent_call_id' AS parent_call_id,
    CAST(t ->> '$.segment' AS INTEGER) AS segment,
    CAST(t ->> '$.prefix_len' AS INTEGER) AS prefix_len,
    COALESCE(CAST(t ->> '$.broken_calls' AS INTEGER), 0) AS broken_calls,
    CAST(json_array_length(rollout_json -> '$.prompt_ids') AS INTEGER) AS prompt_tokens,
    CAST(json_array_length(rollout_json -> '$.completion_ids') AS INTEGER) AS completion_tokens,
    produced_at,
    kafka_partition,
    kafka_offset
FROM (SELECT *, rollout_json -> '$.turn' AS t FROM stg_rollouts)
WHERE t IS NOT NULL AND json_type(t) = 'OBJECT';
