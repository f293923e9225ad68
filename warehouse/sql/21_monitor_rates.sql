-- monitor_rates: the behaviour rates watched per checkpoint for reward hacking (reward spec,
-- "What the platform watches"). Rates are shares of interactions, except the unused sub-agent
-- share, which is a share of sub-agents. Privacy-mode records count: they keep their counts.
-- materialized: view
-- grain: one row per checkpoint_id
-- keys: checkpoint_id
-- check: SELECT * FROM monitor_rates WHERE NOT (edit_rate BETWEEN 0 AND 1 AND clarifying_rate BETWEEN 0 AND 1 AND invalid_tool_call_rate BETWEEN 0 AND 1 AND subagent_rate BETWEEN 0 AND 1 AND censored_share BETWEEN 0 AND 1 AND COALESCE(unused_subagent_share, 0) BETWEEN 0 AND 1)
CREATE OR REPLACE VIEW monitor_rates AS
SELECT
    checkpoint_id,
    count(*) AS n_interactions,
    avg(CASE WHEN n_edits > 0 THEN 1.0 ELSE 0.0 END) AS edit_rate,
    avg(CASE WHEN n_clarifying > 0 THEN 1.0 ELSE 0.0 END) AS clarifying_rate,
    avg(CASE WHEN n_invalid_tool_calls > 0 THEN 1.0 ELSE 0.0 END) AS invalid_tool_call_rate,
    avg(CASE WHEN n_subagents > 0 THEN 1.0 ELSE 0.0 END) AS subagent_rate,
    sum(n_subagents_unused) / NULLIF(sum(n_subagents), 0) AS unused_subagent_share,
    avg(CASE WHEN status = 'censored' THEN 1.0 ELSE 0.0 END) AS censored_share
FROM rewards
GROUP BY ALL;
