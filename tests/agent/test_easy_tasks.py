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


@pytest.mark.parametrize("task", EASY, ids=lambda t: t.function)
def test_an_easy_task_shows_visible_cases_that_give_no_hidden_one_away(task):
    """The agent world's repository tests (``agent.workspace``) show these, never a hidden
    case's arguments; the reference passes them."""
    assert len(task.visible) >= 2
    hidden = {json.dumps(list(c.args)) for c in task.cases}
    assert not hidden & {json.dumps(list(c.args)) for c in task.visible}
    assert grade(task.reference, task.model_copy(update={"cases": task.visible})).passed


def test_a_visible_case_that_repeats_a_hidden_one_is_refused():
    task = get_task("double")
    with pytest.raises(ValueError, match="gives a hidden case away"):
        type(task).model_validate(
            {
                **task.model_dump(exclude_none=True),
                "visible": [task.cases[0].model_dump(exclude_none=True)],
            }
        )
