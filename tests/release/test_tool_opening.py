"""The pre-serve tool-avoidance check on two real tiny models: a parent taught to open its
first answer with a tool call, and a candidate whose output head was edited to push the call
opening's first token down. The check blocks that candidate, and passes a model against
itself."""

from __future__ import annotations

import pytest
import torch

from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base
from release.tool_opening import (
    OpeningConfig,
    first_prompt,
    opening_ids,
    opening_probabilities,
    tool_opening_check,
)
from tests.support.tool_opening import (
    CONFIG,
    TASKS,
    push_down_opening,
    taught_to_call,
    untied_head,
)


@pytest.fixture(scope="module")
def parent_and_candidate(tmp_path_factory, tiny_model):
    registry = CheckpointRegistry(tmp_path_factory.mktemp("registry"))
    register_base(registry, "t-0000", tiny_model)
    torch.manual_seed(0)
    parent = taught_to_call(load_policy(registry, registry.get("t-0000")))
    candidate = load_policy(registry, registry.get("t-0000"))
    untied_head(candidate)
    candidate.model.load_state_dict(parent.model.state_dict())
    return parent, push_down_opening(candidate)


def test_a_candidate_that_stops_opening_with_a_call_is_blocked(parent_and_candidate):
    parent, candidate = parent_and_candidate
    check = tool_opening_check(parent, candidate, CONFIG, tasks=TASKS)
    assert check.parent_mean > 0.005, check.message  # the taught parent opens with a call
    assert check.candidate_mean < 0.5 * check.parent_mean, check.message
    assert check.blocked and "blocked" in check.message


def test_a_model_against_itself_passes(parent_and_candidate):
    parent, _ = parent_and_candidate
    check = tool_opening_check(parent, parent, CONFIG, tasks=TASKS)
    assert check.parent == check.candidate and not check.blocked


def test_the_probability_is_the_opening_tokens_scored_one_by_one(parent_and_candidate):
    """The check's probability is the product of the opening tokens' own probabilities, read
    from the model's logits position by position (one forward over prompt and opening)."""
    parent, _ = parent_and_candidate
    prompt, opening = first_prompt(parent, TASKS[0]), opening_ids(parent)
    with torch.no_grad():
        logits = parent.model(torch.tensor([prompt + opening])).logits[0].double() / 0.7
    at = range(len(prompt) - 1, len(prompt) + len(opening) - 1)
    expected = 1.0
    for position, token in zip(at, opening, strict=True):
        expected *= float(torch.softmax(logits[position], -1)[token])
    got = opening_probabilities(parent, [prompt], OpeningConfig().temperature)[0]
    assert got == pytest.approx(expected, rel=1e-4)
