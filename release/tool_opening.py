"""A pre-serve check for tool avoidance: how likely the candidate is to open its answer with a
tool call on each agent task's first prompt, against its parent, computed by scoring.

An agent that learned to stop calling its tools (bench/RESULTS.md, "Two promoted rounds": 1.30
-> 0.41 calls a run) shows it first in its first answer: prose where a call used to open. The
live monitors see the fall only after the candidate served (``rewards.monitors``), and sampled
evals need many answers to see it through the noise. Scoring needs none: for each task, the
prompt the agent world sends first (system message, the worked example, the task, the tools as
the gateway renders them) is scored under both checkpoints for the tokens that spell the call
opening (``models.tool_format.MARKER``, as the tokenizer writes it), at the sampling
temperature. The result is the exact probability of that opening on these prompts, no sampling
error, so the decision has no false-alarm rate to state: a fall past both limits on the mean
over tasks blocks the candidate, as the monitors' thresholds do.

The opening is scored in one tokenization, the one the tokenizer gives the marker alone; a
model that spells it in other tokens is not counted there (for SmolLM2 and the tiny test model
the marker's own tokens are the way it is written after the assistant's header).

Where it runs: ``tool_opening_check`` takes two scorers, the parent's and the candidate's
(transformers models: the candidate and ``models.snapshot.SnapshotPolicy`` of its parent's
weights, as the candidate evals have them); the round's gate calls it beside the candidate evals
and adds :attr:`OpeningCheck.message` to their alarms when ``blocked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from agent.tasks import Group, Task, load_tasks
from agent.tool_agent import EXAMPLE, SYSTEM, task_message, tool_definitions
from models.policy import CausalLMPolicy
from models.tool_format import MARKER, render
from models.tool_template import defines_tools, template_messages, template_tools


class OpeningConfig(BaseModel):
    """When a fall in the probability of opening with a call blocks the candidate: past both
    limits (relative to the parent's mean and absolute), as the monitors' thresholds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    relative: float = Field(0.25, ge=0)  # fall / parent's mean, the monitors' tool_call_rate's
    absolute: float = Field(0.05, ge=0)  # in probability
    temperature: float = Field(0.7, gt=0)  # the agent's sampling temperature
    example: bool = True  # the agent's first prompt starts with its worked example
    task_group: Group = "easy"  # the agent world's tasks


def first_messages(task: Task, example: bool = True) -> list[dict[str, Any]]:
    """The messages of an agent run's first request (``agent.tool_agent.run_agent``)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    if example:
        messages += [dict(m) for m in EXAMPLE]
    return [*messages, {"role": "user", "content": task_message(task)}]


def first_prompt(policy: CausalLMPolicy, task: Task, example: bool = True) -> list[int]:
    """Token ids of a task's first prompt with the agent's tools, one call an answer, rendered
    as the gateway renders them for this model (its own template's tools, or the default
    format)."""
    messages, tools = first_messages(task, example), tool_definitions()
    if defines_tools(getattr(policy.tokenizer, "chat_template", None)):
        return policy.chat_prompt(template_messages(messages, parallel=False),
                                  template_tools(tools))  # fmt: skip
    return policy.chat_prompt(render(messages, tools, parallel=False))


def opening_ids(policy: CausalLMPolicy) -> list[int]:
    """The tokens that spell the call opening."""
    return list(policy.tokenizer(MARKER, add_special_tokens=False).input_ids)


@torch.no_grad()
def opening_probabilities(policy: CausalLMPolicy, prompts: Sequence[Sequence[int]],
                          temperature: float) -> list[float]:  # fmt: skip
    """Per prompt, the probability that the answer opens with the call marker."""
    opening = opening_ids(policy)
    rows = policy.score(prompts, [opening] * len(prompts), temperature=temperature, pack=False)
    return [float(row.sum().exp()) for row in rows]


@dataclass(frozen=True)
class OpeningCheck:
    """Both checkpoints' probabilities of opening with a call, task by task, and the verdict."""

    tasks: tuple[str, ...]
    parent: tuple[float, ...]
    candidate: tuple[float, ...]
    blocked: bool
    config: OpeningConfig

    @property
    def parent_mean(self) -> float:
        return sum(self.parent) / len(self.parent)

    @property
    def candidate_mean(self) -> float:
        return sum(self.candidate) / len(self.candidate)

    @property
    def message(self) -> str:
        fell = sum(c < p for p, c in zip(self.parent, self.candidate, strict=True))
        verdict = "blocked: tool avoidance" if self.blocked else "ok"
        return (
            f"tool-call opening: {self.parent_mean:.3f} -> {self.candidate_mean:.3f} mean "
            f"probability on {len(self.tasks)} tasks' first prompts ({fell} fell), limits "
            f"{self.config.relative:.0%} and {self.config.absolute:g}: {verdict}"
        )

    def as_record(self) -> dict[str, Any]:
        """The finding in numbers, as a candidate's record keeps it (``bench`` reads them)."""
        return {"tasks": list(self.tasks), "parent": list(self.parent),
                "candidate": list(self.candidate), "parent_mean": self.parent_mean,
                "candidate_mean": self.candidate_mean, "blocked": self.blocked}  # fmt: skip

    @property
    def alarms(self) -> list[str]:
        """The check as the gate takes alarms: its message when it blocks, else nothing."""
        return [self.message] if self.blocked else []


def fell_past(parent: float, candidate: float, config: OpeningConfig) -> bool:
    """Whether the mean fell past both limits.

    >>> c = OpeningConfig()
    >>> fell_past(0.6, 0.3, c), fell_past(0.6, 0.5, c), fell_past(0.04, 0.0, c)
    (True, False, False)
    """
    fall = parent - candidate
    return fall >= config.absolute and fall > 0 and fall >= config.relative * parent


def tool_opening_check(parent: CausalLMPolicy, candidate: CausalLMPolicy,
                       config: OpeningConfig | None = None,
                       tasks: Sequence[Task] | None = None) -> OpeningCheck:  # fmt: skip
    """The candidate's probability of opening with a tool call on each task's first prompt,
    against its parent's (the module's docstring)."""
    config = config or OpeningConfig()
    tasks = tuple(tasks) if tasks is not None else load_tasks(config.task_group)
    if not tasks:
        raise ValueError(f"no tasks in group {config.task_group!r}")
    sides = [
        opening_probabilities(
            policy, [first_prompt(policy, t, config.example) for t in tasks], config.temperature
        )
        for policy in (parent, candidate)
    ]
    before, after = sides
    blocked = fell_past(sum(before) / len(before), sum(after) / len(after), config)
    return OpeningCheck(tuple(t.function for t in tasks), tuple(before), tuple(after), blocked,
                        config)  # fmt: skip


def opening_alarms(parent: CausalLMPolicy, candidate: CausalLMPolicy,
                   config: OpeningConfig | None = None) -> list[str]:  # fmt: skip
    """The check as the gate takes alarms: its message when it blocks, else nothing."""
    return tool_opening_check(parent, candidate, config).alarms
