-- rewards: the reward of each interaction, latest revision.
-- materialized: table
-- grain: one row per interaction, which is (org_id, interaction_id): two organisations that send
--   the same interaction_id have two rows
-- keys: org_id, interaction_id
-- invariants: the row holds the largest revision landed for the interaction; a censored row has
--   no reward and a scored one has one; a privacy-mode row keeps no user_id, terms or reward;
--   t_close is after t_open. A redelivered or rewritten (org_id, interaction_id, revision) counts
--   once.
-- check: SELECT * FROM rewards r JOIN (SELECT org_id, interaction_id, max(revision) AS m FROM stg_rewards GROUP BY ALL) s USING (org_id, interaction_id) WHERE r.revision <> s.m
-- check: SELECT * FROM rewards WHERE (status = 'censored') <> (reward IS NULL)
-- check: SELECT * FROM rewards WHERE censor_reason = 'privacy_mode' AND (user_id IS NOT NULL OR r_edit IS NOT NULL)
-- check: SELECT * FROM rewards WHERE t_close <= t_open
-- check: SELECT * FROM (SELECT count(DISTINCT (org_id, interaction_id)) AS n FROM stg_rewards) WHERE n <> (SELECT count(*) FROM rewards)
-- How: a narrow first pass finds each interaction's winning copy (largest revision, then its
-- latest place in Kafka); a join keeps exactly that copy. A hash aggregate over four columns is
-- much cheaper than a window sorting whole rows.
CREATE OR REPLACE TABLE rewards AS
WITH winner AS (
    SELECT org_id, interaction_id,
           max({'revision': revision, 'partition': kafka_partition, 'offset': kafka_offset}) AS k
    FROM stg_rewards
    GROUP BY org_id, interaction_id
)
SELECT s.* EXCLUDE (kafka_partition, kafka_offset)
FROM stg_rewards s
JOIN winner w
  ON s.interaction_id = w.interaction_id
 AND s.org_id IS NOT DISTINCT FROM w.org_id
 AND s.revision = w.k.revision
 AND s.kafka_partition = w.k.partition
 AND s.kafka_offset = w.k.offset;
