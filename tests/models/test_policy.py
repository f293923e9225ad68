"""The policy interface on the tiny model (the real code path of every model): batched sampling
of prompts of different lengths with the sampling distribution's log-probabilities, scoring that
gives them back, stop conditions, and the strict rollout form."""

from __future__ import annotations

import polars as pl
import pytest
import torch

from checkpoints.weights import load_policy
from models.examples import read_examples
from models.rollout import ModelIdentity, Rollout, RolloutError
from models.sampling import SamplingParams, sampling_log_probs
from tests.support.checkpoints import TS, register_variant, serve
from warehouse.manifest import BATCH_DATA_SCHEMA


@pytest.fixture
def policy(registry):
    return load_policy(registry, registry.get("t-0000"))


def _prompts(policy):
    return [
        policy.chat_prompt([{"role": "user", "content": "Write `slugify(s)` in Python."}]),
        [5, 6, 7],
        policy.chat_prompt([{"role": "user", "content": "hi"}]),
    ]


@pytest.mark.parametrize(
    "params",
    [SamplingParams(max_tokens=12), SamplingParams(max_tokens=12, temperature=0.7, top_p=0.8)],
)
def test_sampled_logprobs_equal_a_separate_scoring_pass_for_mixed_lengths(policy, params):
    prompts = _prompts(policy)
    assert len({len(p) for p in prompts}) == 3
    done = policy.sample(prompts, params, torch.Generator().manual_seed(0))
    with torch.no_grad():
        scored = policy.score(
            prompts, [d.token_ids for d in done], params.temperature, params.top_p
        )
    for d, s in zip(done, scored, strict=True):
        assert len(d.token_ids) == len(d.logprobs) == len(s) <= 12
        assert torch.allclose(torch.tensor(d.logprobs), s, atol=1e-5)
    # each row alone samples what it sampled in the batch (padding changes nothing)
    alone = policy.sample(prompts[1:2], params, torch.Generator().manual_seed(0))
    assert alone[0].token_ids[0] in range(policy.vocab_size)


def test_the_same_generator_seed_gives_the_same_completions(policy):
    params = SamplingParams(max_tokens=8)
    a = policy.sample(_prompts(policy), params, torch.Generator().manual_seed(3))
    b = policy.sample(_prompts(policy), params, torch.Generator().manual_seed(3))
    assert a == b


def test_stop_strings_and_end_tokens_finish_a_completion(policy):
    prompts = _prompts(policy) * 4
    params = SamplingParams(max_tokens=40, stop=("e",))
    done = policy.sample(prompts, params, torch.Generator().manual_seed(1))
    for d in done:
        if d.finish_reason == "stop":
            decoded = policy.tokenizer.decode(list(d.token_ids), skip_special_tokens=True)
            assert "e" in decoded or d.token_ids[-1] in policy.end_ids
            assert "e" not in d.text  # the text is cut before the stop string
        else:
            assert len(d.token_ids) == 40
    assert any(d.finish_reason == "stop" for d in done)


def test_nucleus_sampling_never_draws_outside_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    log_dist = sampling_log_probs(logits, 1.0, 0.75)
    assert log_dist.exp()[0, 2:].sum() == 0
    assert torch.allclose(log_dist.exp().sum(), torch.tensor(1.0))
    hot = sampling_log_probs(logits, 2.0, 1.0).exp()
    assert hot[0, 0] < 0.5 and hot[0, 3] > 0.05  # a higher temperature flattens


def test_prompts_outside_the_vocabulary_are_refused(policy):
    with pytest.raises(ValueError, match="token ids are integers"):
        policy.sample([[1, policy.vocab_size]], SamplingParams(), torch.Generator())


IDENT = ModelIdentity("llama", "a" * 64, "b" * 64)


@pytest.mark.parametrize(("changes", "message"), [
    ({"prompt_ids": ()}, "prompt_ids"),
    ({"logprobs": (-1.0, -1.0)}, "one per completion token"),
    ({"logprobs": (float("nan"),)}, "finite numbers"),
    ({"finish_reason": "eos"}, "finish_reason"),
    ({"completion_ids": (1,) * 5, "logprobs": (-1.0,) * 5}, "max_tokens"),
])  # fmt: skip
def test_rollouts_that_break_the_form_are_refused_with_the_field(changes, message):
    fields = dict(
        interaction_id="i",
        checkpoint_id="c",
        model=IDENT,
        sampling=SamplingParams(max_tokens=4),
        prompt_ids=(1,),
        completion_ids=(2,),
        logprobs=(-0.1,),
        finish_reason="length",
        created_at=TS,
    )
    with pytest.raises(RolloutError, match=message):
        Rollout(**{**fields, **changes})


def test_an_old_rollout_is_refused_with_its_own_reason_and_counted(tmp_path, registry):
    policy = load_policy(registry, registry.get("t-0000"))
    examples = serve(policy, registry.get("t-0000"), 4, seed=0)
    base = {name: None for name in BATCH_DATA_SCHEMA.names()}
    old = b'{"rollout_version": 1, "interaction_id": "i-0", "checkpoint_id": "t-0000"}'
    rows = [
        {
            **base,
            "batch_id": "b",
            "interaction_id": e.rollout.interaction_id,
            "checkpoint_id": "t-0000",
            "status": "scored",
            "reward": e.reward,
            "rollout_json": e.rollout.to_json().decode(),
        }
        for e in examples
    ]
    rows[0]["rollout_json"] = old.decode().replace("i-0", rows[0]["interaction_id"])
    rows[1]["rollout_json"] = None
    rows[2]["checkpoint_id"] = "t-0000"
    path = tmp_path / "b.parquet"
    pl.DataFrame(rows, schema=BATCH_DATA_SCHEMA).write_parquet(path)
    read = read_examples(path)
    assert [e.rollout for e in read.examples] == [e.rollout for e in examples[2:]]
    assert read.skipped == {"old_rollout_version": 1, "no_rollout": 1}


def test_a_variant_checkpoint_has_other_weights_and_the_same_tokenizer(registry):
    register_variant(registry, "t-0001", "t-0000", seed=1)
    a = load_policy(registry, registry.get("t-0000"))
    b = load_policy(registry, registry.get("t-0001"))
    assert a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
    assert not torch.equal(next(a.model.parameters()), next(b.model.parameters()))


def test_a_run_s_calls_scored_inside_its_last_call_give_each_call_s_own_log_probs(policy):
    """Packing: an agent run's second and third calls extend the first (its prompt and answer,
    then a tool result), so all three are read from the third's sequence; their log-probs and
    gradients are those of each call scored alone. A row that differs anywhere (the same prompt,
    another answer) is not packed."""
    params = SamplingParams(max_tokens=6, temperature=0.8, top_p=0.9)
    first = policy.chat_prompt([{"role": "user", "content": "Write `slugify(s)` in Python."}])
    prompts, completions = [first], []
    for tool_result in ([11, 12, 13], [14, 15], None):
        (done,) = policy.sample([prompts[-1]], params, torch.Generator().manual_seed(len(prompts)))
        completions.append(list(done.token_ids))
        if tool_result is not None:
            prompts.append(prompts[-1] + completions[-1] + tool_result)
    prompts.append(first)  # a retry of the first call with another answer
    completions.append([completions[0][0] + 1, *completions[0][1:]])

    from models.token_scorer import score_batch

    assert score_batch(prompts, completions, policy.pad_id).input_ids.shape[0] == 2
    assert score_batch(prompts, completions, policy.pad_id, pack=False).input_ids.shape[0] == 4

    def scored(rows):
        policy.model.zero_grad()
        out = policy.score([prompts[i] for i in rows], [completions[i] for i in rows],
                           params.temperature, params.top_p)  # fmt: skip
        torch.stack([o.sum() for o in out]).sum().backward()
        return out, [p.grad.clone() for p in policy.model.parameters() if p.grad is not None]

    together, grads = scored(range(4))
    apart = [scored([i]) for i in range(4)]
    for packed, (own, _) in zip(together, apart, strict=True):
        assert torch.allclose(packed, own[0], atol=1e-5), (packed, own)
    apart_grads = [sum(g) for g in zip(*(g for _, g in apart), strict=True)]
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(grads, apart_grads, strict=True))
