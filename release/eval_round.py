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
from models.policy import Sampler
from models.sampling import SamplingParams
from release.candidate_evals import (
    RateTest,
    behaviour_reader,
    behaviour_tests,
    eval_prompts,
    holm,
    paired_samples,
    paired_test,
)
from release.gate import GateConfig
from release.task_evals import grade_answers, task_passes

# a task pass rate's alarm: a fall of 5 points and 20 % of the parent's rate
PASS_RATE_MIN_ABSOLUTE, PASS_RATE_MIN_RELATIVE = 0.05, 0.2


def candidate_evals(parent: Sampler, candidate: Sampler, recent: Sequence[Sequence[int]],
                    params: SamplingParams, gate: GateConfig, seed: int, *,
                    vocab_size: int) -> list[RateTest]:  # fmt: skip
    """Every eval of ``candidate`` against ``parent`` (none when ``gate.eval_prompts`` is 0);
    ``recent``: the round's held-out prompts (token ids), ``params``: their sampling;
    ``vocab_size``: the model's, for a simulator's reader.

    With a task group other than the shipped one, the answers to its tasks are sampled once:
    the behaviours are read on them and the pass rate graded on the very same answers."""
    if gate.eval_prompts == 0:
        return []
    tasks = load_tasks(gate.eval_tasks)
    own_tasks = gate.eval_tasks != "shipped"
    prompts = eval_prompts(candidate, recent, gate.eval_prompts,
                           [t.prompt for t in tasks] if own_tasks else None)  # fmt: skip
    before, after = paired_samples(parent, candidate, prompts, params, gate.eval_samples, seed)
    tests = behaviour_tests(before, after, behaviour_reader(gate.eval_reader, vocab_size),
                            alpha=gate.eval_alpha)  # fmt: skip
    if gate.eval_reader != "harness":
        return holm(tests, gate.eval_alpha)
    if own_tasks:  # the tasks' answers close the list, task by task
        tail = len(tasks) * gate.eval_samples
        passes = [grade_answers([c.text for c in side[-tail:]], tasks, gate.eval_samples)
                  for side in (before, after)]  # fmt: skip
    else:
        passes = [task_passes(policy, params, gate.eval_samples, seed, tasks)
                  for policy in (parent, candidate)]  # fmt: skip
    tests.append(paired_test("task_pass_rate", passes[0], passes[1], gate.eval_alpha,
                             PASS_RATE_MIN_RELATIVE, PASS_RATE_MIN_ABSOLUTE))  # fmt: skip
    return holm(tests, gate.eval_alpha)
