"""Simulated users for the training rounds of `rtrl run`: they ask the served model for an edit
(a chat prompt through its own template) and react to it through the real SDK, so the platform
learns only from telemetry.

Their hidden taste, which nothing hands to the trainer: a proposed edit is accepted with a
probability equal to the share of its tokens in the lowest quarter of the vocabulary ("edits in
the codebase's style"), and a completion holding one of the last tokens of the vocabulary makes
an invalid tool call.
The served checkpoint improves only if rewards computed from their events carry that taste back
through the stream, the warehouse and the trainer.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ingest.contract import uuid7
from ingest.sdk import Client
from rewards.config import RewardConfig
from rewards.terms import r_latency
from trainer.candidate_evals import SimulatedBehaviour
from trainer.policy import CausalLMPolicy
from trainer.sampling import SamplingParams
from trainer.serving import PolicyServer


@dataclass(frozen=True)
class Reaction:
    accept_probability: float
    invalid_tool_call: bool
    lines_added: int
    latency_ms: int


@dataclass(frozen=True)
class Taste:
    """The default users: they like edits low in the vocabulary, and the last tokens make an
    invalid tool call."""

    vocab_size: int

    def accept_probability(self, completion: Sequence[int]) -> float:
        """
        >>> Taste(32).accept_probability([0, 7, 8, 31])
        0.5
        """
        return sum(token < self.vocab_size // 4 for token in completion) / len(completion)

    def invalid_tool_call(self, completion: Sequence[int]) -> bool:
        # the same reading as the trainer's candidate evals: one mapping of text to actions
        return SimulatedBehaviour(self.vocab_size).invalid(completion)

    def react(self, completion: Sequence[int], rng: random.Random) -> Reaction:
        return Reaction(
            self.accept_probability(completion),
            self.invalid_tool_call(completion),
            len(completion),
            40 * len(completion),
        )


@dataclass(frozen=True)
class Indifferent:
    """Users whose reactions do not depend on what they were served: the gate's calibration
    population. Their acceptance and invalid-call rates are the default users' at the start of
    a run, and every event field is drawn without looking at the completion, so every
    checkpoint has exactly the same true reward."""

    vocab_size: int
    accept: float = 0.26
    invalid: float = 0.14

    def accept_probability(self, completion: Sequence[int]) -> float:
        return self.accept

    def react(self, completion: Sequence[int], rng: random.Random) -> Reaction:
        return Reaction(
            self.accept, rng.random() < self.invalid, rng.randint(4, 8), rng.randint(160, 320)
        )


POPULATIONS = {"default": Taste, "indifferent": Indifferent}


@dataclass(frozen=True)
class RoundFigures:
    checkpoint_id: str
    interactions: int
    accepted: int
    invalid_tool_calls: int
    taste: float
    """The mean acceptance probability: what the users' taste says of the served policy."""


TASKS = ("slugify(s)", "reverse(xs)", "count_words(text)", "is_prime(n)", "flatten(items)",
         "dedupe(xs)", "clamp(value, lo, hi)", "mean(xs)")  # fmt: skip


def play_round(server: PolicyServer, client: Client, taste: Taste | Indifferent,
               interactions: int,
               seed: int, params: SamplingParams, batch: int = 32) -> RoundFigures:  # fmt: skip
    """``interactions`` users each ask for one edit and react; rollouts are acknowledged by
    Kafka before this returns, events are handed to the SDK (flushed by the caller)."""
    rng = random.Random(seed)
    accepted = invalid = 0
    taste_sum = 0.0
    checkpoint = server.checkpoint_id
    requests = []
    for _ in range(interactions):
        task = rng.choice(TASKS)
        prompt = server.policy.chat_prompt(
            [{"role": "user", "content": f"Write `{task}` in Python."}]
        )
        requests.append((f"i_{uuid7()}", prompt))
    served = [
        done
        for start in range(0, interactions, batch)
        for done in server.complete_many(requests[start : start + batch], params)
    ]
    for n, (rollout, _completion) in enumerate(served):
        interaction_id = rollout.interaction_id
        if rollout.checkpoint_id != checkpoint:
            raise RuntimeError("the served checkpoint changed within a round")
        completion = rollout.completion_ids
        reaction = taste.react(completion, rng)
        taste_sum += reaction.accept_probability
        is_invalid = reaction.invalid_tool_call
        is_accepted = rng.random() < reaction.accept_probability
        accepted += is_accepted
        invalid += is_invalid
        edit_id = f"e{n}"
        fields = {
            "session_id": f"s_sim{n % 50}",
            "user_id": f"u_sim{n % 200:04d}",
            "checkpoint_id": checkpoint,
        }
        for event_type, payload in (
            ("interaction.started", {"mode": "agent"}),
            ("agent.tool_call", {"tool": "edit_file", "valid": not is_invalid}),
            (
                "agent.edit_proposed",
                {"edit_id": edit_id, "lines_added": reaction.lines_added, "lines_removed": 0},
            ),
            ("edit.accepted" if is_accepted else "edit.rejected", {"edit_id": edit_id}),
            (
                "interaction.completed",
                {"latency_ms": reaction.latency_ms, "output_tokens": reaction.lines_added},
            ),
        ):
            client.emit(event_type, interaction_id, payload, **fields)
    server.flush()
    return RoundFigures(checkpoint, interactions, accepted, invalid, taste_sum / interactions)


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


def expected_reward(reaction: Reaction, config: RewardConfig) -> float:
    """Reward v1 of one simulated interaction, in expectation over the user's accept draw.

    >>> round(expected_reward(Reaction(0.5, True, 8, 320), RewardConfig()), 4)
    -0.2532
    """
    edit = reaction.accept_probability * config.accept
    edit += (1 - reaction.accept_probability) * config.reject
    tool = config.invalid_tool_call if reaction.invalid_tool_call else 0.0
    return edit + tool + r_latency(reaction.latency_ms, config)


def _mean_se(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)
    return mean, math.sqrt(var / len(values))


def true_value(policy: CausalLMPolicy, population: Taste | Indifferent, params: SamplingParams,
               n: int, seed: int, batch: int = 64) -> TrueValue:  # fmt: skip
    """The simulator's knowledge, which the platform never sees: used only to report how often
    the gate promoted a candidate that truly is better."""
    rng = random.Random(seed)
    prompts = [
        policy.chat_prompt([{"role": "user", "content": f"Write `{rng.choice(TASKS)}` in Python."}])
        for _ in range(n)
    ]
    generator = torch.Generator(policy.device).manual_seed(seed)
    reactions = [
        population.react(done.token_ids, rng)
        for start in range(0, n, batch)
        for done in policy.sample(prompts[start : start + batch], params, generator)
    ]
    config = RewardConfig()
    accept = _mean_se([r.accept_probability for r in reactions])
    reward = _mean_se([expected_reward(r, config) for r in reactions])
    return TrueValue(*accept, *reward, n)
