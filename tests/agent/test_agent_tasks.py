"""The shipped coding tasks: the set the evals and the users name, each reference solution
passing its hidden cases in the sandbox, plausible wrong solutions failing, and the data
shipping in the wheel."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import pytest

from agent.sandbox import grade
from agent.tasks import TASKS_FILE, Case, get_task, load_tasks, parse_tasks

REPO = Path(__file__).resolve().parents[2]
TASKS = load_tasks()


def _literal(path: Path, name: str) -> tuple[str, ...]:
    """A module-level tuple constant, read without importing its module."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{name} not found in {path}")


def test_the_set_is_the_eval_tasks_and_covers_the_simulated_users_tasks():
    signatures = [task.signature for task in TASKS]
    assert len(signatures) >= 12
    assert signatures == list(_literal(REPO / "release/candidate_evals.py", "EVAL_TASKS"))
    assert set(_literal(REPO / "rtrl/worlds/token_users.py", "TASKS")) <= set(signatures)


def test_each_task_has_a_prompt_naming_it_and_several_hidden_cases():
    for task in TASKS:
        assert f"`{task.signature}`" in task.prompt and task.prompt.startswith("Write ")
        assert len(task.cases) >= 4
        assert f"def {task.function}(" in task.reference


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.function)
def test_every_reference_solution_passes_its_hidden_tests(task):
    result = grade(task.reference, task)
    assert result.passed and result.failure is None, result
    assert len(result.cases) == len(task.cases) == result.total


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.function)
def test_a_function_that_returns_nothing_fails_every_case(task):
    result = grade(f"def {task.function}(*args):\n    return None\n", task)
    assert not result.passed and result.failed == result.total == len(task.cases)


@pytest.mark.parametrize(
    "function,code",
    [
        ("dedupe", "def dedupe(xs):\n    return sorted(set(xs))"),  # loses first-seen order
        ("is_prime", "def is_prime(n):\n    return all(n % k for k in range(2, n))"),  # 0, 1
        ("slugify", "def slugify(s):\n    return s.lower().replace(' ', '-')"),
        ("mean", "def mean(xs):\n    return sum(xs) / max(len(xs), 1)"),  # no ValueError
        ("chunks", "def chunks(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]"),
        ("flatten", "def flatten(items):\n    return [x for i in items for x in i]"),
        ("merge", "def merge(a, b):\n    return a + b"),
        ("title_case", "def title_case(s):\n    return s.capitalize()"),
    ],
)
def test_a_plausible_wrong_solution_fails_some_case(function, code):
    task = get_task(function)
    result = grade(code, task)
    assert not result.passed
    assert 0 < result.failed <= result.total


def test_expected_values_are_judged_outside_the_code():
    case = Case(args=([1, 2],), expected=1.5)
    assert case.judge(1.5000000000001, ()) and not case.judge(1.51, ())
    assert not case.judge(1.5, ("ValueError", "Exception"))  # raising is no answer
    raises = Case(args=([],), raises="ValueError")
    assert raises.judge(None, ("ValueError", "Exception", "BaseException"))
    assert not raises.judge(None, ())  # returning is not raising
    assert not Case(args=(1,), expected=[1, 2]).judge([1, 2, 3], ())
    assert not Case(args=(1,), expected=[1.0]).judge([True], ())  # a flag is no number


@pytest.mark.parametrize(
    "toml,problem",
    [
        (
            '[[task]]\nsignature = "f(x)"\nprompt = "Write `f(x)`."\nreference = ""\n'
            'cases = [{ args = [1], expected = 1, raises = "ValueError" }]',
            "either",
        ),
        (
            '[[task]]\nsignature = "f(x)"\nprompt = "Write `f(x)`."\nreference = ""\n'
            "cases = [{ args = [1, 2], expected = 1 }]",
            "arguments",
        ),
        (
            '[[task]]\nsignature = "f(x)"\nprompt = "Write it."\nreference = ""\n'
            "cases = [{ args = [1], expected = 1 }]",
            "does not name",
        ),
        (
            '[[task]]\nsignature = "f(x)"\nprompt = "Write `f(x)`."\nreference = ""\n'
            "cases = [{ args = [1], expected = 1 }]\n" * 2,
            "same function",
        ),
    ],
)
def test_malformed_task_data_is_refused(toml, problem):
    with pytest.raises(ValueError, match=problem):
        parse_tasks(toml)


def test_the_task_data_ships_as_package_data():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    assert any(fnmatch.fnmatch("agent", p) for p in setuptools["packages"]["find"]["include"])
    patterns = setuptools["package-data"].get("*", []) + setuptools["package-data"].get("agent", [])
    assert any(fnmatch.fnmatch(TASKS_FILE, p) for p in patterns)
    assert (REPO / "agent/__init__.py").is_file()  # a package, found by find
