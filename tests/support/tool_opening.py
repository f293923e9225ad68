"""Two real tiny models for the pre-serve tool-avoidance check (``release.tool_opening``): a
parent taught to open its first answer with a tool call, and an edit of its output head that
pushes the call opening's first token down."""

from __future__ import annotations

import torch

from agent.tasks import load_tasks
from models.policy import CausalLMPolicy
from models.token_scorer import core_model
from release.tool_opening import OpeningConfig, first_prompt, opening_ids

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
    weight = head.weight
    assert isinstance(weight, torch.Tensor)
    optimiser = torch.optim.Adam([weight], lr=5e-2)
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
