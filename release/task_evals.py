"""A checkpoint's pass rate on the shipped tasks: it writes each task's function, the harness
takes the code out of its answer, the sandbox runs the hidden tests. The candidate evals compare
it with the parent's on the same prompts and seeds (``release.candidate_evals``): a candidate
that got worse at the work is caught before it serves, as one that games a monitor is."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agent.harness import Harness
from agent.sandbox import Limits, grade
from agent.tasks import Task, load_tasks
from models.policy import Sampler
from models.sampling import SamplingParams

# the eval's own limits: a task's reference runs in milliseconds, so tighter than a user's
TASK_LIMITS = Limits(wall_s=3, cpu_s=2)


def task_passes(policy: Sampler, params: SamplingParams, samples: int, seed: int,
                tasks: Sequence[Task] | None = None,
                limits: Limits = TASK_LIMITS) -> list[bool]:  # fmt: skip
    """``samples`` answers per task, each True when its code passes every hidden case. An
    answer without Python code fails without running anything."""
    tasks = tuple(tasks or load_tasks())
    return grade_answers(task_answers(policy, params, samples, seed, tasks), tasks, samples,
                         limits)  # fmt: skip


def task_answers(policy: Sampler, params: SamplingParams, samples: int, seed: int,
                 tasks: Sequence[Task]) -> list[str]:  # fmt: skip
    """``samples`` answers' texts per task, task by task, from the prompt a user sends: the
    same prompts and seeds for every checkpoint."""
    prompts = [
        policy.chat_prompt([{"role": "user", "content": task.prompt}])
        for task in tasks
        for _ in range(samples)
    ]
    generator = torch.Generator(policy.device).manual_seed(seed)
    return [
        done.text
        for start in range(0, len(prompts), 32)
        for done in policy.sample(prompts[start : start + 32], params, generator)
    ]


def grade_answers(answers: Sequence[str], tasks: Sequence[Task], samples: int,
                  limits: Limits = TASK_LIMITS) -> list[bool]:  # fmt: skip
    """Whether each answer passes its task's hidden cases: ``samples`` answers per task, task
    by task (the order :func:`task_passes` samples them in)."""
    if len(answers) != len(tasks) * samples:
        raise ValueError(f"{len(answers)} answers for {len(tasks)} tasks x {samples} samples")
    harness = Harness()
    passed = []
    for i, answer in enumerate(answers):
        code = harness.read(answer).code()
        passed.append(bool(code) and grade(code, tasks[i // samples], limits).passed)
    return passed
