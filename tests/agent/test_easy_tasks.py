"""The easy tasks and the held-out ones (``agent/tasks.toml``): each reference passes its hidden
cases in the sandbox and a function that returns nothing fails them; the groups are disjoint,
the shipped set is unchanged, and no prompt gives a hidden case away."""

from __future__ import annotations

import json

import pytest

from agent.sandbox import grade
from agent.tasks import get_task, load_tasks

EASY, HELD_OUT = load_tasks("easy"), load_tasks("held_out")


def test_the_groups_are_disjoint_and_the_default_is_the_shipped_set():
    shipped = load_tasks()
    assert len(shipped) == 12 and {t.group for t in shipped} == {"shipped"}
    assert len(EASY) >= 8 and len(HELD_OUT) >= 4
    names = [t.function for t in (*shipped, *EASY, *HELD_OUT)]
    assert len(names) == len(set(names))
    assert get_task("subtract").group == "held_out"  # found whatever its group


@pytest.mark.parametrize("task", EASY + HELD_OUT, ids=lambda t: t.function)
def test_an_easy_task_is_graded_by_its_hidden_cases(task):
    assert task.prompt.startswith(f"Write `{task.signature}` in Python: ")
    assert len(task.cases) >= 4
    result = grade(task.reference, task)
    assert result.passed and result.total == len(task.cases), result
    nothing = grade(f"def {task.function}(*args):\n    return None\n", task)
    assert not nothing.passed and nothing.failed == nothing.total
    for case in task.cases:  # the prompt names no case's arguments
        assert json.dumps(list(case.args))[1:-1] not in task.prompt
