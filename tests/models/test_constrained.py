"""Tool calls decoded under a grammar (``tool_choice`` "required" or a named function), on the
tiny model: every answer is a call of an allowed function whose arguments validate; the learner
scores the recorded tokens under the same masks, so the first ratio is exactly 1; a constraint
this process cannot replay is refused and counted, never scored without its masks; a token the
grammar forces has log-probability 0."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema
import pytest
import torch

from checkpoints.weights import load_policy
from models.constraint import (
    NOT_REPLAYABLE,
    Constraint,
    ConstraintNotReplayable,
    tool_call_constraint,
)
from models.examples import Example, read_examples
from models.grammar_mask import replay
from models.rollout import ModelIdentity, Rollout
from models.sampling import SamplingParams, unpack_mask
from models.scoring import score_examples
from models.tool_format import call_text, parse_calls
from tests.support.checkpoints import TS, write_batch
from trainer.learner import LearnerConfig, update

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string", "maxLength": 6},
                       "line": {"type": "integer", "minimum": 1, "maximum": 999}},
        "required": ["path", "line"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_mode", "parameters": {
        "type": "object",
        "properties": {"mode": {"enum": ["fast", "safe"]}, "dry": {"type": "boolean"}},
        "required": ["mode"], "additionalProperties": False}}},
]  # fmt: skip
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
NAMED = {"type": "function", "function": {"name": "read_file"}}
IDENT = ModelIdentity("llama", "a" * 64, "b" * 64)


@pytest.fixture
def policy(registry):
    return load_policy(registry, registry.get("t-0000"))


def _prompts(policy, n):
    asks = ["Open the file.", "Switch to safe mode.", "hi", "Read line 3 of a.py, then go fast."]
    return [policy.chat_prompt([{"role": "user", "content": asks[i % len(asks)]}])
            for i in range(n)]  # fmt: skip


def _constrained(policy, constraint, params, n=8, seed=0, free=()):
    """``n`` rollouts sampled under ``constraint`` (rows in ``free`` without one)."""
    prompts = _prompts(policy, n)
    per_row = [None if i in free else constraint for i in range(n)]
    done = policy.sample(prompts, params, torch.Generator().manual_seed(seed),
                         constraints=per_row)  # fmt: skip
    rollouts = [
        Rollout(f"i-{i}", "t-0000", IDENT, params, tuple(p), d.token_ids, d.logprobs,
                d.finish_reason, TS, constraint=c)
        for i, (p, d, c) in enumerate(zip(prompts, done, per_row, strict=True))
    ]  # fmt: skip
    # rewards that differ within each prompt's group (rows i and i + 4 share a prompt)
    return [Example(r, reward=float(i % 3)) for i, r in enumerate(rollouts)], done


@pytest.mark.parametrize(
    ("choice", "parallel", "names"),
    [(NAMED, True, {"read_file"}), ({"type": "function", "function": {"name": "set_mode"}}, True,
      {"set_mode"}), ("required", False, {"read_file", "set_mode"}),
     ("required", True, {"read_file", "set_mode"})],
)  # fmt: skip
def test_constrained_samples_are_calls_whose_arguments_validate(policy, choice, parallel, names):
    constraint = tool_call_constraint(TOOLS, choice, parallel)
    calls_seen = []
    for params in (
        SamplingParams(max_tokens=400),
        SamplingParams(max_tokens=400, temperature=0.7, top_p=0.9, stop=("a",)),
    ):
        _, done = _constrained(policy, constraint, params, n=12)
        for d in done:
            assert d.finish_reason == "stop" and d.token_ids[-1] in policy.end_ids
            parsed = parse_calls(d.text, TOOLS, parallel=parallel and choice == "required")
            assert parsed.broken is None and parsed.content is None, d.text
            assert parsed.calls and (parallel or len(parsed.calls) == 1)
            for call in parsed.calls:
                assert call.name in names
                jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
                calls_seen.append(call.name)
            assert d.text == "\n".join(call_text(c.name, c.arguments) for c in parsed.calls)
    if choice == "required":
        assert set(calls_seen) == names  # the grammar does not favour one function
        assert (len(calls_seen) > 24) == parallel  # some answers hold several calls


@pytest.mark.parametrize(
    "params",
    [SamplingParams(max_tokens=200), SamplingParams(max_tokens=200, temperature=0.8, top_p=0.9)],
)
def test_scoring_replays_the_masks_so_the_first_ratio_is_exactly_one(tmp_path, policy, params):
    constraint = tool_call_constraint(TOOLS, "required", parallel=True)
    examples, _ = _constrained(policy, constraint, params, n=6, free={2})
    batch = write_batch(tmp_path / "b.parquet", examples)
    read = read_examples(batch)  # the constraint survives the rollout's JSON and the batch file
    assert [e.rollout for e in read.examples] == [e.rollout for e in examples]
    assert not read.skipped
    scored = score_examples(policy, read.examples)
    diffs = [(s - torch.tensor(e.rollout.logprobs)).abs().max().item()
             for s, e in zip(scored, read.examples, strict=True)]  # fmt: skip
    assert max(diffs) < 1e-5, diffs
    # the learner's own pass (pi_old against the behaviour log-probabilities), then its
    # gradient steps through the masked distribution
    result = update(policy, read.examples, LearnerConfig(epochs=1, minibatches=2, micro_batch=3))
    assert result.stats.behaviour_ratio_dev < 1e-5
    assert result.stats.grad_steps == 2 and torch.isfinite(torch.tensor(result.stats.loss_first))
    assert result.stats.clip_fraction == 0.0  # the steps' ratios, with gradients, stay near 1


def test_a_rollout_of_another_grammar_version_is_skipped_and_counted(tmp_path, policy):
    constraint = tool_call_constraint(TOOLS, NAMED)
    examples, _ = _constrained(policy, constraint, SamplingParams(max_tokens=200), n=3)
    other = constraint.model_copy(update={"version": "0.0.1"})
    elsewhere = constraint.model_copy(update={"library": "xgrammar"})
    rows = [examples[0]] + [
        replace(e, rollout=replace(e.rollout, constraint=c))
        for e, c in zip(examples[1:], (other, elsewhere), strict=True)
    ]
    read = read_examples(write_batch(tmp_path / "b.parquet", rows))
    assert [e.rollout for e in read.examples] == [examples[0].rollout]
    assert read.skipped == {NOT_REPLAYABLE: 2}
    for row in rows[1:]:  # handed to scoring directly, they are refused with the same reason
        with pytest.raises(ConstraintNotReplayable) as refused:
            score_examples(policy, [row])
        assert refused.value.reason == NOT_REPLAYABLE


def test_a_token_the_grammar_refuses_is_not_replayable(policy):
    constraint = tool_call_constraint(TOOLS, NAMED)
    examples, _ = _constrained(policy, constraint, SamplingParams(max_tokens=200), n=1)
    rollout = examples[0].rollout
    x = policy.tokenizer.convert_tokens_to_ids("x")
    ids = (rollout.completion_ids[0], x) + rollout.completion_ids[2:]  # "<x..." is no call
    broken = replace(examples[0], rollout=replace(rollout, completion_ids=ids))
    with pytest.raises(ConstraintNotReplayable, match="position 1") as refused:
        score_examples(policy, [broken])
    assert refused.value.reason == "constraint_not_replayable"
    cut = replace(examples[0], rollout=replace(rollout, completion_ids=ids[:1], logprobs=(0.0,)))
    assert score_examples(policy, [cut])[0].tolist() == [0.0]  # a prefix replays


def test_forced_positions_have_log_probability_zero_and_others_are_kept(policy):
    constraint = tool_call_constraint(TOOLS, NAMED)
    params = SamplingParams(max_tokens=200, temperature=0.9, top_p=0.95)
    examples, _ = _constrained(policy, constraint, params, n=4)
    scored = score_examples(policy, examples)
    forced = free = 0
    for example, score in zip(examples, scored, strict=True):
        r = example.rollout
        masks = replay(policy.grammar_tokenizer(), constraint, r.completion_ids)
        allowed = unpack_mask(masks, policy.vocab_size).sum(-1).tolist()
        assert len(allowed) == len(r.logprobs) == len(score)
        for n, recorded, rescored in zip(allowed, r.logprobs, score.tolist(), strict=True):
            if n == 1:
                assert recorded == 0.0 and rescored == 0.0
                forced += 1
            else:
                free += 1
    assert forced > 0 and free > 0
    # the envelope and the end are forced, the arguments are chosen
    assert any(lp < 0 for e in examples for lp in e.rollout.logprobs)


def test_the_grammar_is_the_default_format_exactly(policy):
    constraint = tool_call_constraint(TOOLS, "required", parallel=True)
    text = "\n".join([call_text("read_file", {"path": "a.py", "line": 3}),
                      call_text("set_mode", {"mode": "safe", "dry": False})])  # fmt: skip
    ids = policy.tokenizer(text, add_special_tokens=False).input_ids
    ids.append(policy.tokenizer.eos_token_id)
    assert replay(policy.grammar_tokenizer(), constraint, ids).shape[0] == len(ids)
    for wrong in (text.replace(": ", ":"), text + " ", text.replace('"a.py"', '"abcdefg"')):
        ids = policy.tokenizer(wrong, add_special_tokens=False).input_ids
        with pytest.raises(ConstraintNotReplayable):
            replay(policy.grammar_tokenizer(), constraint, ids)


@pytest.mark.parametrize(("tools", "choice", "message"), [
    (TOOLS, {"type": "function", "function": {"name": "delete"}}, "do not have"),
    ([], "required", "no tools"),
    (TOOLS, "sometimes", "tool_choice"),
    (TOOLS + TOOLS[:1], "required", "two tools"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
     "required", "describe an object"),
    ([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"d": {"type": "string", "format": "shoe-size"}}}}}],
     "required", "Unknown format"),
])  # fmt: skip
def test_choices_the_tools_cannot_satisfy_are_refused_with_the_reason(tools, choice, message):
    with pytest.raises(ValueError, match=message):
        tool_call_constraint(tools, choice)


def test_a_constraint_round_trips_and_free_choices_have_none():
    assert tool_call_constraint(TOOLS, "auto") is None
    assert tool_call_constraint(TOOLS, "none") is None
    c = tool_call_constraint(TOOLS, "required", parallel=False)
    assert c is not None and c.options.functions == ("read_file", "set_mode")
    assert Constraint.model_validate(json.loads(json.dumps(c.to_json_dict()))) == c
    assert hash(c) == hash(Constraint.model_validate(c.to_json_dict()))


@pytest.mark.slow
def test_smollm2s_tokenizer_from_its_gguf_file_is_read_byte_for_byte():
    """transformers builds SmolLM2's tokenizer from the GGUF file with a byte-fallback decoder
    before the byte-level one; read as given, llguidance would take ``Ċ`` for that letter instead
    of a newline (``models.grammar_mask``'s docstring)."""
    from transformers import AutoTokenizer

    from models.catalog import fetch, models_dir
    from models.grammar_mask import grammar_tokenizer

    path = fetch("smollm2-135m", models_dir())
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name,
                                              local_files_only=True)  # fmt: skip
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    grammar = grammar_tokenizer(tokenizer, len(tokenizer), {end})
    constraint = tool_call_constraint(TOOLS, "required", parallel=True)
    text = "\n".join([call_text("read_file", {"path": "a.py", "line": 3}),
                      call_text("set_mode", {"mode": "fast"})])  # fmt: skip
    ids = tokenizer(text, add_special_tokens=False).input_ids + [end]
    masks = replay(grammar, constraint, ids)
    allowed = unpack_mask(masks, len(tokenizer))
    after_calls = allowed[-1].nonzero().flatten().tolist()  # another call, or the end of the turn
    assert after_calls == sorted([end, tokenizer.convert_tokens_to_ids("Ċ")])
    assert (allowed.sum(-1) == 1).sum() > len(ids) // 2  # the envelope is forced, token by token
