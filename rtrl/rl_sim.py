"""The simulated users of `rtrl run`'s training rounds at work: each asks the served model
for an edit (a chat prompt through its own template) and reacts to it through the real SDK
(reactions: ``rtrl.token_users``), so the platform learns only from telemetry. Also the
simulator's own knowledge of a policy's true value, which the platform never sees.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from ingest.contract import uuid7
from ingest.sdk import Client
from rewards.config import RewardConfig
from rtrl.token_users import (
    TASKS,
    Population,
    draw_outcome,
    expected_reward,
    interaction_events,
)
from trainer.policy import CausalLMPolicy
from trainer.sampling import SamplingParams
from trainer.serving import PolicyServer


@dataclass(frozen=True)
class RoundFigures:
    checkpoint_id: str
    interactions: int
    accepted: int
    invalid_tool_calls: int
    taste: float
    """The mean acceptance probability: what the users' taste says of the served policy."""
    clarifying: int = 0
    """Questions instead of an edit (only the agent users ask)."""


def play_round(server: PolicyServer, client: Client, taste: Population,
               interactions: int,
               seed: int, params: SamplingParams, batch: int = 32) -> RoundFigures:  # fmt: skip
    """``interactions`` users each ask for one edit and react; rollouts are acknowledged by
    Kafka before this returns, events are handed to the SDK (flushed by the caller)."""
    rng = random.Random(seed)
    accepted = invalid = clarifying = 0
    taste_sum = 0.0
    checkpoint = server.checkpoint_id
    requests, tasks = [], []
    for _ in range(interactions):
        task = rng.choice(TASKS)
        prompt = server.policy.chat_prompt(
            [{"role": "user", "content": f"Write `{task}` in Python."}]
        )
        requests.append((f"i_{uuid7()}", prompt))
        tasks.append(task)
    served = [
        done
        for start in range(0, interactions, batch)
        for done in server.complete_many(requests[start : start + batch], params)
    ]
    for n, ((rollout, _completion), task) in enumerate(zip(served, tasks, strict=True)):
        if rollout.checkpoint_id != checkpoint:
            raise RuntimeError("the served checkpoint changed within a round")
        reaction = taste.react(rollout.completion_ids, rng, task)
        taste_sum += reaction.accept_probability
        is_accepted, dissatisfied = draw_outcome(reaction, rng)
        accepted += is_accepted
        invalid += reaction.invalid_tool_call
        clarifying += reaction.clarifying
        fields = {
            "session_id": f"s_sim{n % 50}",
            "user_id": f"u_sim{n % 200:04d}",
            "checkpoint_id": checkpoint,
        }
        for event_type, payload in interaction_events(reaction, is_accepted, dissatisfied, f"e{n}"):
            client.emit(event_type, rollout.interaction_id, payload, **fields)
    server.flush()
    return RoundFigures(
        checkpoint, interactions, accepted, invalid, taste_sum / interactions, clarifying
    )


@dataclass(frozen=True)
class TrueValue:
    """What the users' hidden taste makes of a policy over ``n`` completions of the round's
    tasks: its mean chance of an accepted edit, and the reward v1 it earns in expectation (the
    accept or reject score, the invalid tool call's penalty, the latency term), with their
    standard errors."""

    accept: float
    stderr: float
    reward: float
    reward_stderr: float
    n: int
    invalid: float = 0.0  # share of completions that make an invalid tool call
    clarifying: float = 0.0  # share that ask instead of editing


def _mean_se(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)
    return mean, math.sqrt(var / len(values))


def true_value(policy: CausalLMPolicy, population: Population, params: SamplingParams,
               n: int, seed: int, batch: int = 64) -> TrueValue:  # fmt: skip
    """The simulator's knowledge, which the platform never sees: used only to report how often
    the gate promoted a candidate that truly is better."""
    rng = random.Random(seed)
    tasks = [rng.choice(TASKS) for _ in range(n)]
    prompts = [
        policy.chat_prompt([{"role": "user", "content": f"Write `{task}` in Python."}])
        for task in tasks
    ]
    generator = torch.Generator(policy.device).manual_seed(seed)
    completions = [
        done
        for start in range(0, n, batch)
        for done in policy.sample(prompts[start : start + batch], params, generator)
    ]
    reactions = [
        population.react(done.token_ids, rng, task)
        for done, task in zip(completions, tasks, strict=True)
    ]
    config = RewardConfig()
    accept = _mean_se([r.accept_probability for r in reactions])
    reward = _mean_se([expected_reward(r, config) for r in reactions])
    invalid = sum(r.invalid_tool_call for r in reactions) / n
    clarifying = sum(r.clarifying for r in reactions) / n
    return TrueValue(*accept, *reward, n, invalid, clarifying)
