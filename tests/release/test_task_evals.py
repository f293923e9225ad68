"""The shipped tasks' pass rate as a candidate eval: answers graded by the hidden tests in the
sandbox, and a candidate whose code got worse is an alarm, one that got better is not. The
policies here are scripted (their answers are given), so the grading is what is tested."""

from __future__ import annotations

import torch

from agent.tasks import load_tasks
from models.policy import Completion
from models.sampling import SamplingParams
from release.candidate_evals import one_sided_test
from release.task_evals import task_passes

TASKS = load_tasks()


class AnswersBy:
    """A policy that answers each task's prompt with ``write(task)`` (one prompt per task and
    sample, in order, as task_passes asks)."""

    device = torch.device("cpu")

    def __init__(self, write, samples: int) -> None:  # noqa: ANN001
        self.write, self.samples, self.asked = write, samples, 0

    def chat_prompt(self, messages):  # noqa: ANN001, ANN201
        return [1, 2, 3]

    def sample(self, prompts, params, generator):  # noqa: ANN001, ANN201
        out = []
        for _ in prompts:
            task = TASKS[self.asked // self.samples]
            out.append(Completion((1,), (0.0,), "stop", self.write(task)))
            self.asked += 1
        return out


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```\n"


def broken(task) -> str:  # noqa: ANN001
    return fenced(f"def {task.function}(*args):\n    return None")


PARAMS = SamplingParams(max_tokens=8)


def test_references_pass_and_broken_code_or_prose_fails():
    good = task_passes(AnswersBy(lambda t: fenced(t.reference), 2), PARAMS, 2, 0)  # type: ignore[arg-type]
    assert good == [True] * (2 * len(TASKS))
    bad = task_passes(AnswersBy(broken, 1), PARAMS, 1, 0)  # type: ignore[arg-type]
    prose = task_passes(AnswersBy(lambda t: "Could you say more?", 1), PARAMS, 1, 0)  # type: ignore[arg-type]
    assert bad == prose == [False] * len(TASKS)


def test_a_candidate_that_writes_worse_code_is_an_alarm_a_better_one_is_not():
    n = 3
    parent = task_passes(
        AnswersBy(lambda t: fenced(t.reference) if TASKS.index(t) % 2 == 0 else broken(t), n),  # type: ignore[arg-type]
        PARAMS,
        n,
        0,
    )
    assert sum(parent) == n * len(TASKS[::2])  # every other task right
    worse = task_passes(AnswersBy(broken, n), PARAMS, n, 0)  # type: ignore[arg-type]
    better = task_passes(AnswersBy(lambda t: fenced(t.reference), n), PARAMS, n, 0)  # type: ignore[arg-type]
    assert one_sided_test("task_pass_rate", parent, worse, 0.05, 0.2, 0.05).alarm
    assert not one_sided_test("task_pass_rate", parent, better, 0.05, 0.2, 0.05).alarm
