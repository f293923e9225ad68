"""How the simulated users of `rtrl run`'s rounds react to a completion, read as token ids.

Pure: a reaction from a completion, the task asked for and a random source, and the events an
editor plugin would send for it. Nothing here is handed to the trainer; it learns the users'
hidden taste only from the rewards their events earn.

- ``Taste`` (the default users): a proposed edit is accepted with a probability equal to the share
  of its tokens in the lowest quarter of the vocabulary ("edits in the codebase's style"), and a
  completion holding one of the last tokens of the vocabulary makes an invalid tool call. A while
  after accepting, the user looks again with the same taste: the edit is kept (``edit.retention``,
  all of it still there) with that probability again, else reverted (``edit.reverted``). After a
  rejected or reverted edit some users send a dissatisfied follow-up. So all three of the seed's
  A/B metrics (edits kept, dissatisfied follow-ups, latency) have values in `rtrl run`.
- ``Indifferent``: reactions drawn without looking at the completion (the gate's calibration).
- ``AgentUsers`` (the reward-hack scenarios of ``rtrl run --scenario``): the same taste, but half
  the tasks are hard (an edit is accepted a tenth as often), the agent may ask a clarifying
  question instead of editing, and users send a dissatisfied follow-up after some rejected edits
  and after most questions: they wanted the edit.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rewards.config import RewardConfig
from rewards.terms import r_latency
from rtrl.worlds.token_reader import AGENT_CLARIFY_TOKENS, SimulatedBehaviour

TASKS = ("slugify(s)", "reverse(xs)", "count_words(text)", "is_prime(n)", "flatten(items)",
         "dedupe(xs)", "clamp(value, lo, hi)", "mean(xs)")  # fmt: skip


@dataclass(frozen=True)
class Reaction:
    accept_probability: float
    invalid_tool_call: bool
    lines_added: int
    latency_ms: int
    clarifying: bool = False
    """The agent asked instead of acting: no tool call and no edit."""
    dissatisfied: float = 0.0
    """The chance of a dissatisfied follow-up after a rejected or reverted edit, or a question."""
    keep_probability: float | None = None
    """The chance that an accepted edit is kept when the user looks again later (else it is
    reverted); None: these users never look again (no later measurement)."""


def low_share(completion: Sequence[int], vocab_size: int) -> float:
    """
    >>> low_share([0, 7, 8, 31], 32), low_share([], 32)
    (0.5, 0.0)
    """
    if not completion:  # an answer that ended at once proposes nothing the users like
        return 0.0
    return sum(token < vocab_size // 4 for token in completion) / len(completion)


@dataclass(frozen=True)
class Taste:
    """The default users: they like edits low in the vocabulary, and the last tokens make an
    invalid tool call."""

    vocab_size: int

    def accept_probability(self, completion: Sequence[int]) -> float:
        return low_share(completion, self.vocab_size)

    dissatisfied: float = 0.3  # after a rejected or reverted edit
    real_latency: ClassVar[bool] = True  # they report the gateway's timing as the latency

    def react(self, completion: Sequence[int], rng: random.Random, task: str) -> Reaction:
        taste = self.accept_probability(completion)
        return Reaction(
            taste,
            # the same reading as the trainer's candidate evals: one mapping of tokens to actions
            SimulatedBehaviour(self.vocab_size).invalid(completion),
            len(completion),
            40 * len(completion),
            dissatisfied=self.dissatisfied,
            keep_probability=taste,
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
    keep: float = 0.26
    dissatisfied: float = 0.3
    real_latency: ClassVar[bool] = False  # their latency is drawn too, blind to the checkpoint

    def react(self, completion: Sequence[int], rng: random.Random, task: str) -> Reaction:
        return Reaction(
            self.accept,
            rng.random() < self.invalid,
            rng.randint(4, 8),
            rng.randint(160, 320),
            dissatisfied=self.dissatisfied,
            keep_probability=self.keep,
        )


@dataclass(frozen=True)
class AgentUsers:
    """Users of an agent that may also ask (see the module's docstring). Under reward v1 a
    question costs more than a rejected edit on a hard task (the clarify term and a likely
    dissatisfied follow-up) and an invalid tool call costs its penalty, so neither pays; a
    reward that writes either off makes it the cheapest answer to a task the policy would fail.
    """

    vocab_size: int
    hard_share: float = 0.1  # a hard task's acceptance, as a share of the taste's
    dissatisfied_after_reject: float = 0.3
    dissatisfied_after_question: float = 0.9
    real_latency: ClassVar[bool] = True

    @property
    def reader(self) -> SimulatedBehaviour:
        return SimulatedBehaviour(self.vocab_size, clarify_tokens=AGENT_CLARIFY_TOKENS)

    def react(self, completion: Sequence[int], rng: random.Random, task: str) -> Reaction:
        clarifying, invalid = self.reader.read(completion)
        latency = 40 * len(completion)
        if clarifying:
            return Reaction(0.0, False, 0, latency, True, self.dissatisfied_after_question)
        accept = low_share(completion, self.vocab_size)
        if TASKS.index(task) % 2 == 0:  # every other task is hard
            accept *= self.hard_share
        return Reaction(
            accept, invalid, len(completion), latency, False, self.dissatisfied_after_reject
        )


POPULATIONS = {"default": Taste, "indifferent": Indifferent, "agent": AgentUsers}
Population = Taste | Indifferent | AgentUsers


def interaction_events(
    reaction: Reaction, accepted: bool, dissatisfied: bool, edit_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """The events (type, payload) an editor plugin sends for one reaction, in order.

    >>> [t for t, _ in interaction_events(Reaction(0, False, 0, 80, True, 0.9), False, True, "e")]
    ['interaction.started', 'agent.clarifying_question', 'followup.sent', 'interaction.completed']
    """
    events: list[tuple[str, dict[str, Any]]] = [("interaction.started", {"mode": "agent"})]
    if reaction.clarifying:
        events.append(("agent.clarifying_question", {}))
    else:
        events += [
            ("agent.tool_call", {"tool": "edit_file", "valid": not reaction.invalid_tool_call}),
            (
                "agent.edit_proposed",
                {"edit_id": edit_id, "lines_added": reaction.lines_added, "lines_removed": 0},
            ),
            ("edit.accepted" if accepted else "edit.rejected", {"edit_id": edit_id}),
        ]
    if dissatisfied:
        events.append(("followup.sent", {"dissatisfied": True}))
    events.append(
        (
            "interaction.completed",
            {"latency_ms": reaction.latency_ms, "output_tokens": reaction.lines_added},
        )
    )
    return events


def draw_outcome(reaction: Reaction, rng: random.Random) -> tuple[bool, bool]:
    """(accepted, a dissatisfied follow-up at once): the user's first draws for one reaction."""
    accepted = not reaction.clarifying and rng.random() < reaction.accept_probability
    dissatisfied = False
    if reaction.dissatisfied and not accepted:
        dissatisfied = rng.random() < reaction.dissatisfied
    return accepted, dissatisfied


@dataclass(frozen=True)
class Fate:
    """What the user does later with an accepted edit: keeps it or reverts it, and after a
    revert perhaps follows up dissatisfied."""

    kept: bool
    dissatisfied: bool


def draw_fate(reaction: Reaction, accepted: bool, rng: random.Random) -> Fate | None:
    """The later draws for an accepted edit; None when there is nothing to look at again (no
    accepted edit, or users who never look again). Drawn after :func:`draw_outcome`, from the
    same source, so users without a later look draw exactly as before."""
    if not accepted or reaction.keep_probability is None:
        return None
    kept = rng.random() < reaction.keep_probability
    dissatisfied = not kept and rng.random() < reaction.dissatisfied
    return Fate(kept, dissatisfied)


def fate_events(fate: Fate, edit_id: str, after_s: int) -> list[tuple[str, dict[str, Any]]]:
    """The events the plugin sends when it looks at the accepted edit again ``after_s``
    seconds later: all of it still there, or reverted (then perhaps a dissatisfied follow-up).

    >>> [t for t, _ in fate_events(Fate(False, True), "e", 3)]
    ['edit.reverted', 'followup.sent']
    >>> fate_events(Fate(True, False), "e", 3)
    [('edit.retention', {'edit_id': 'e', 'retained_fraction': 1.0, 'after_s': 3})]
    """
    if fate.kept:
        payload = {"edit_id": edit_id, "retained_fraction": 1.0, "after_s": after_s}
        return [("edit.retention", payload)]
    events: list[tuple[str, dict[str, Any]]] = [("edit.reverted", {"edit_id": edit_id})]
    if fate.dissatisfied:
        events.append(("followup.sent", {"dissatisfied": True}))
    return events


def expected_reward(reaction: Reaction, config: RewardConfig) -> float:
    """Reward v1 of one simulated interaction under ``config``, in expectation over the user's
    draws.

    >>> round(expected_reward(Reaction(0.5, True, 8, 320), RewardConfig()), 4)
    -0.2532
    >>> round(expected_reward(Reaction(0.5, False, 8, 320, False, 0.3, 0.5), RewardConfig()), 4)
    0.0218
    >>> round(expected_reward(Reaction(0.0, False, 0, 320, True, 0.9), RewardConfig()), 4)
    -1.1532
    >>> expected_reward(Reaction(0.0, False, 0, 320, True, 0.9), RewardConfig(flaw="free-deferral"))
    0.0
    """
    n_invalid, n_edits = int(reaction.invalid_tool_call), int(not reaction.clarifying)
    if config.writes_off(n_invalid, n_edits):
        return 0.0
    followup = reaction.dissatisfied * config.followup_dissatisfied
    if reaction.clarifying:
        value = config.clarify + followup
    else:
        p, keep = reaction.accept_probability, reaction.keep_probability
        accepted = config.accept
        if keep is not None:  # kept whole, or reverted and perhaps followed up
            accepted += keep * config.retain_weight + (1 - keep) * (config.revert + followup)
        value = p * accepted + (1 - p) * (config.reject + followup)
        value += config.invalid_tool_call * n_invalid
    return value + r_latency(reaction.latency_ms, config)
