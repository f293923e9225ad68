"""The policy's interface, the rollout form, and examples read from a batch file. No broker."""

from __future__ import annotations

import math

import orjson
import polars as pl
import pytest
import torch

from trainer.examples import read_examples
from trainer.policy import PolicyConfig, new_policy, sample, token_logprobs
from trainer.rollout import Rollout, RolloutError
from warehouse.manifest import BATCH_DATA_SCHEMA

SMALL = PolicyConfig(vocab_size=8, hidden=8, max_new_tokens=4)
TS = "2026-11-30T10:00:00.000000Z"


@pytest.mark.parametrize("field,value", [("vocab_size", 1), ("hidden", 0), ("layers", -1),
                                         ("max_new_tokens", 2.5), ("hidden", True)])
def test_policy_config_refuses_impossible_shapes(field, value):
    with pytest.raises(ValueError, match=field):
        PolicyConfig(**{field: value})


def test_policy_config_round_trips_and_refuses_unknown_fields():
    assert PolicyConfig.from_json_dict(SMALL.to_json_dict()) == SMALL
    with pytest.raises(ValueError, match="unknown"):
        PolicyConfig.from_json_dict({**SMALL.to_json_dict(), "heads": 2})


def test_same_seed_same_weights_and_the_global_rng_is_left_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = new_policy(SMALL, seed=5), new_policy(SMALL, seed=5)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values(), strict=True))
    c = new_policy(SMALL, seed=6)
    assert not torch.equal(a.head.weight, c.head.weight)


def test_sampled_logprobs_are_the_policys_own_for_a_batch_of_prompts():
    policy = new_policy(SMALL, seed=0)
    generator = torch.Generator().manual_seed(1)
    prompts = [[1, 2, 3], [4, 5, 6], [7, 0, 1]]
    samples = [sample(policy, p, generator) for p in prompts]
    got = token_logprobs(policy, torch.tensor(prompts), torch.tensor([s[0] for s in samples]))
    assert torch.allclose(got, torch.tensor([s[1] for s in samples]), atol=1e-5)
    # a probability distribution: the log-probabilities of every next token sum to one
    logits, _ = policy(torch.tensor(prompts))
    assert torch.allclose(torch.logsumexp(torch.log_softmax(logits, -1), -1), torch.zeros(3, 3),
                          atol=1e-5)


def test_temperature_sharpens_the_sampled_distribution():
    policy = new_policy(SMALL, seed=0)
    cold = [sample(policy, [1, 2], torch.Generator().manual_seed(s), temperature=0.05)[1]
            for s in range(20)]
    warm = [sample(policy, [1, 2], torch.Generator().manual_seed(s), temperature=3.0)[1]
            for s in range(20)]
    assert sum(map(sum, cold)) > sum(map(sum, warm))  # cold picks near-certain tokens
    with pytest.raises(ValueError, match="temperature"):
        sample(policy, [1], torch.Generator(), temperature=0)


@pytest.mark.parametrize("prompt", [[], [8], [-1], [1.0], [True]])
def test_sample_refuses_tokens_outside_the_vocabulary(prompt):
    with pytest.raises(ValueError, match="prompt_ids"):
        sample(new_policy(SMALL, seed=0), prompt, torch.Generator())


def _rollout(**changes) -> Rollout:
    fields = dict(interaction_id="i1", checkpoint_id="c1", prompt_ids=(1, 2),
                  completion_ids=(3, 4), logprobs=(-0.5, -1.5), created_at=TS)
    return Rollout(**{**fields, **changes})


@pytest.mark.parametrize("changes,message", [
    ({"interaction_id": ""}, "interaction_id"),
    ({"checkpoint_id": "c" * 129}, "checkpoint_id"),
    ({"prompt_ids": ()}, "prompt_ids"),
    ({"completion_ids": (1, -2)}, "completion_ids"),
    ({"logprobs": (-0.5,)}, "one per completion token"),
    ({"logprobs": (-0.5, math.nan)}, "finite"),
    ({"logprobs": (-0.5, 0.1)}, "<= 0"),
    ({"created_at": "yesterday"}, "created_at"),
])
def test_rollouts_that_break_the_form_are_refused_with_the_field(changes, message):
    with pytest.raises(RolloutError, match=message):
        _rollout(**changes)


def test_rollout_json_is_strict_about_version_and_fields():
    raw = orjson.loads(_rollout().to_json())
    assert Rollout.from_json(orjson.dumps(raw)) == _rollout()
    for broken, message in [({**raw, "rollout_version": 2}, "rollout_version"),
                            ({**raw, "extra": 1}, "unknown"),
                            ({k: v for k, v in raw.items() if k != "logprobs"}, "missing"),
                            ({**raw, "prompt_ids": "12"}, "prompt_ids")]:
        with pytest.raises(RolloutError, match=message):
            Rollout.from_json(orjson.dumps(broken))
    with pytest.raises(RolloutError, match="not JSON"):
        Rollout.from_json(b"{")


def _batch_file(tmp_path, rows: list[dict]) -> str:
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    frame = pl.DataFrame([{**base, "batch_id": "b1", "checkpoint_id": "c1",
                           "reward_version": "v", "status": "scored", **row} for row in rows],
                         schema=BATCH_DATA_SCHEMA)
    path = tmp_path / "batch.parquet"
    frame.write_parquet(path)
    return str(path)


def test_examples_keep_rows_with_their_own_rollout_and_count_the_rest(tmp_path):
    good = _rollout().to_json().decode()
    path = _batch_file(tmp_path, [
        {"interaction_id": "i1", "reward": 0.5, "rollout_json": good},
        {"interaction_id": "i2", "reward": 0.5, "rollout_json": None},
        {"interaction_id": "i3", "reward": 0.5, "rollout_json": _rollout(
            interaction_id="i3", checkpoint_id="c0").to_json().decode()},
        {"interaction_id": "i4", "reward": 0.5, "rollout_json": "{}"},
        {"interaction_id": "i5", "reward": 0.5, "rollout_json": good},  # i1's rollout
        {"interaction_id": "i6", "reward": None, "rollout_json": good},
    ])
    read = read_examples(path)
    assert read.checkpoint_id == "c1"
    assert [(e.rollout.interaction_id, e.reward) for e in read.examples] == [("i1", 0.5)]
    assert read.skipped == {"no_rollout": 1, "other_checkpoint": 1, "other_interaction": 1,
                            "bad_rollout": 1, "no_reward": 1}


def test_a_batch_of_two_checkpoints_is_refused(tmp_path):
    path = _batch_file(tmp_path, [{"interaction_id": "i1", "reward": 0.5},
                                  {"interaction_id": "i2", "reward": 0.5,
                                   "checkpoint_id": "c2"}])
    with pytest.raises(ValueError, match="one checkpoint"):
        read_examples(path)
