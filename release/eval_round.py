"""One round's candidate evals, as the gate runs them before a candidate may serve: its
behaviour against its parent's on recent prompts and the shipped eval prompts, and (with the
harness reader) its pass rate on a group of tasks under their hidden tests, all compared pair by
pair (``release.candidate_evals.paired_test``). With a task group other than the shipped one,
the behaviours are read on that group's tasks too, in place of the shipped eval prompts.

Sized by ``GateConfig``: ``eval_prompts`` recent prompts (0: no evals), ``eval_samples``
generations per prompt and task and checkpoint, ``eval_tasks`` the task group. The code world
(``rtrl run --world code``) uses the held-out tasks, which no user asks; bench/RESULTS.md has
what a round's evals cost on SmolLM2 and how much the pairing saves.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.tasks import load_tasks
from models.policy import CausalLMPolicy
from models.sampling import SamplingParams
from release.candidate_evals import (
    RateTest,
    behaviour_reader,
    compare_behaviour,
    eval_prompts,
    paired_test,
)
from release.gate import GateConfig
from release.task_evals import task_passes

# a task pass rate's alarm: a fall of 5 points and 20 % of the parent's rate
PASS_RATE_MIN_ABSOLUTE, PASS_RATE_MIN_RELATIVE = 0.05, 0.2


def candidate_evals(parent: CausalLMPolicy, candidate: CausalLMPolicy,
                    recent: Sequence[Sequence[int]], params: SamplingParams, gate: GateConfig,
                    seed: int) -> list[RateTest]:  # fmt: skip
    """Every eval of ``candidate`` against ``parent`` (none when ``gate.eval_prompts`` is 0);
    ``recent``: the round's held-out prompts (token ids), ``params``: their sampling."""
    if gate.eval_prompts == 0:
        return []
    tasks = load_tasks(gate.eval_tasks)
    # the behaviours are read on the shipped eval prompts, or on the tasks of another group
    texts = None if gate.eval_tasks == "shipped" else [t.prompt for t in tasks]
    tests = compare_behaviour(
        parent,
        candidate,
        eval_prompts(candidate, recent, gate.eval_prompts, texts),
        params,
        behaviour_reader(gate.eval_reader, candidate.vocab_size),
        samples=gate.eval_samples,
        alpha=gate.eval_alpha,
        seed=seed,
    )
    if gate.eval_reader == "harness":
        before, after = (
            task_passes(policy, params, gate.eval_samples, seed, tasks)
            for policy in (parent, candidate)
        )
        tests.append(paired_test("task_pass_rate", before, after, gate.eval_alpha,
                                 PASS_RATE_MIN_RELATIVE, PASS_RATE_MIN_ABSOLUTE))  # fmt: skip
    return tests
