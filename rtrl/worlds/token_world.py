"""The simulated users of `rtrl run`'s training rounds at work: each asks the gateway for an
edit over HTTP and reacts to it through the real SDK
(reactions: ``rtrl.worlds.token_users``), so the platform learns only from telemetry. Also the
simulator's own knowledge of a policy's true value, which the platform never sees.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any

import httpx
import torch

from ingest.sdk import Client
from models.policy import CausalLMPolicy
from models.sampling import SamplingParams
from rewards.config import RewardConfig
from rtrl.worlds.http_users import LOOK_AGAIN_S, Answer, Later, ask_all
from rtrl.worlds.token_users import (
    TASKS,
    Population,
    Reaction,
    draw_fate,
    draw_outcome,
    expected_reward,
    fate_events,
    interaction_events,
)

__all__ = ["LOOK_AGAIN_S", "Later", "RoundFigures", "play_round", "true_value"]


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
    passed: int = 0  # the code world: answers whose code passed the task's hidden tests
    kept: int = 0  # the code world: accepted edits kept on the second look
    dissatisfied: int = 0  # the code world: interactions with a dissatisfied follow-up
    tool_calls: int = 0  # the agent world: every call the model made in the round's runs
    broken_tool_calls: int = 0  # the agent world: those that were invalid


def react_and_report(client: Client, population: Population, rng: random.Random, task: str,
                     answer: Answer, edit_id: str, fields: dict[str, Any],
                     later: Later) -> tuple[Reaction, bool]:  # fmt: skip
    """One user's reaction to the gateway's ``answer``, reported through the SDK stamped with
    the checkpoint that served it and ``fields``; the reaction and whether the edit was
    accepted. What the user does later with an accepted edit is appended to ``later``. Users
    who react to the model's output report the gateway's real timing as the latency."""
    reaction = population.react(answer.token_ids, rng, task)
    if population.real_latency:
        reaction = replace(reaction, latency_ms=answer.latency_ms)
    accepted, dissatisfied = draw_outcome(reaction, rng)
    stamp = {**fields, "checkpoint_id": answer.checkpoint_id}
    for event_type, payload in interaction_events(reaction, accepted, dissatisfied, edit_id):
        client.emit(event_type, answer.interaction_id, payload, **stamp)
    fate = draw_fate(reaction, accepted, rng)
    if fate is not None:
        for event_type, payload in fate_events(fate, edit_id, round(LOOK_AGAIN_S)):
            later.append((event_type, answer.interaction_id, payload, stamp))
    return reaction, accepted


def play_round(http: httpx.Client, client: Client, taste: Population, interactions: int,
               seed: int, params: SamplingParams) -> RoundFigures:  # fmt: skip
    """``interactions`` users each ask the gateway for one edit over HTTP and react; the
    gateway publishes the rollouts, the events are handed to the SDK (flushed by the caller).
    """
    rng = random.Random(seed)
    asks = [(f"u_sim{n % 200:04d}", rng.choice(TASKS)) for n in range(interactions)]
    answers = ask_all(http, asks, params)
    checkpoints = {a.checkpoint_id for a in answers}
    if len(checkpoints) != 1:
        raise RuntimeError(f"the served checkpoint changed within a round: {sorted(checkpoints)}")
    accepted = invalid = clarifying = 0
    taste_sum = 0.0
    later = Later(client)
    for n, ((user_id, task), answer) in enumerate(zip(asks, answers, strict=True)):
        fields = {"session_id": f"s_sim{n % 50}", "user_id": user_id}
        reaction, is_accepted = react_and_report(client, taste, rng, task, answer, f"e{n}",
                                                 fields, later)  # fmt: skip
        taste_sum += reaction.accept_probability
        accepted += is_accepted
        invalid += reaction.invalid_tool_call
        clarifying += reaction.clarifying
    later.drain()
    return RoundFigures(
        checkpoints.pop(), interactions, accepted, invalid, taste_sum / interactions, clarifying
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
