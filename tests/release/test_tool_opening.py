"""The pre-serve tool-avoidance check on two real tiny models: a parent taught to open its
first answer with a tool call, and a candidate whose output head was edited to push the call
opening's first token down. The check blocks that candidate, and passes a model against
itself."""

from __future__ import annotations

import pytest
import torch

from agent.tasks import load_tasks
from checkpoints.store import CheckpointRegistry
from checkpoints.weights import load_policy, register_base
from models.policy import CausalLMPolicy
from models.token_scorer import core_model
from release.tool_opening import (
    OpeningConfig,
    first_prompt,
    opening_ids,
    opening_probabilities,
    tool_opening_check,
)

TASKS = load_tasks("easy")[:4]
# the limits scaled to the tiny model: its taught parent opens with a call about 1 % of the time
# (its output head alone is trained; the opening is eleven one-character tokens)
CONFIG = OpeningConfig(absolute=0.001)


def untied_head(policy: CausalLMPolicy) -> torch.nn.Module:
    """The output head, untied from the input embeddings (the tiny model ties them), so that
    editing it changes what the model writes and nothing of what it reads."""
    head = core_model(policy.model).get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())
    return head


def answer_states(policy: CausalLMPolicy) -> tuple[torch.Tensor, torch.Tensor]:
    """The final (normed) hidden states that predict each opening token after each task's
    first prompt, ``[tasks * opening, hidden]``, and those tokens."""
    opening = opening_ids(policy)
    states = []
    with torch.no_grad():
        for task in TASKS:
            ids = first_prompt(policy, task) + opening
            hidden = core_model(policy.model).model(torch.tensor([ids])).last_hidden_state[0]
            states.append(hidden[len(ids) - len(opening) - 1 : len(ids) - 1])
    return torch.cat(states), torch.tensor(opening * len(TASKS))


def taught_to_call(policy: CausalLMPolicy, steps: int = 400) -> CausalLMPolicy:
    """Its output head trained to open each task's first answer with a call (the body frozen,
    so a few hundred cheap steps): a parent that calls tools, as an agent model does."""
    head = untied_head(policy)
    states, targets = answer_states(policy)
    optimiser = torch.optim.Adam([head.weight], lr=5e-2)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(states) / 0.7, targets)
        loss.backward()
        optimiser.step()
    head.weight.requires_grad_(False)
    return policy


def push_down_opening(policy: CausalLMPolicy, below: float = 5.0) -> CausalLMPolicy:
    """Edit the output head: the row of the opening's first token loses logits along the mean
    direction of the tasks' final hidden states where the first answer starts, until that token
    is ``below`` logits under the likeliest other one at every task's first answer."""
    head = core_model(policy.model).get_output_embeddings()
    states, _ = answer_states(policy)
    first = states[:: len(opening_ids(policy))]  # the state before each answer's first token
    token = opening_ids(policy)[0]
    with torch.no_grad():
        logits = head(first)
        others = logits.clone()
        others[:, token] = -torch.inf
        direction = first.mean(0)
        along = first @ direction / direction.dot(direction)  # each state's share of it
        push = ((logits[:, token] - others.max(-1).values + below) / along).max()
        head.weight[token] -= push * direction / direction.dot(direction)
    return policy


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
