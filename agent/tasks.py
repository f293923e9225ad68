"""The shipped coding tasks: small functions a user asks the agent for, each with hidden tests.

They give the simulated users something real to judge (an edit is good when its code passes the
task's tests) and the candidate evals prompts the model can answer. The tasks live as data in
``tasks.toml`` beside this module (package data, so they ship in the wheel); this module reads
and checks them. A case's expected value never reaches the code under test: the sandbox gets only
the arguments and its answers are compared here (``Case.judge``), so code cannot read its
grader.

Tasks come in groups: ``shipped`` (the default set, which the candidate evals and the simulated
users name), ``easy`` (one obvious line each, where a small model starts: users of the code world
ask for them, so the model trains on them) and ``held_out`` (as easy, but never asked by a user
and never trained on: only the evals see them, to tell learning the work from learning the
tasks). An easy task's ``visible`` cases are the ones a repository's own tests show (the
agent world's ``run_tests``, ``agent.workspace``), on other arguments than the hidden cases'.

>>> [task.function for task in load_tasks()][:3]
['slugify', 'reverse', 'count_words']
>>> [task.function for task in load_tasks("held_out")][:2]
['subtract', 'cube']
>>> task = get_task("clamp")
>>> task.signature, len(task.cases) > 3
('clamp(value, lo, hi)', True)
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from collections.abc import Sequence
from importlib import resources
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

TASKS_FILE = "tasks.toml"
Group = Literal["shipped", "easy", "held_out"]
GROUPS: tuple[Group, ...] = get_args(Group)
FLOAT_TOLERANCE = 1e-9  # relative: a mean computed in another order is still right
_SIGNATURE = re.compile(r"(?P<name>[a-z_][a-z0-9_]*)\((?P<params>[a-z0-9_, ]*)\)")


class Case(BaseModel):
    """One hidden test: call the function with ``args``; it must return ``expected`` or raise
    the exception named ``raises``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    args: tuple[Any, ...]
    expected: Any = None
    raises: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_outcome(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("expected" in data) == ("raises" in data):
            raise ValueError("a case gives either `expected` or `raises`, not both or neither")
        return data

    def judge(self, returned: object, raised: Sequence[str]) -> bool:
        """Whether one call's outcome passes this case: the value it returned (JSON-decoded,
        so a tuple arrives as a list), or the built-in exception classes of what it raised
        (empty when it returned), so that a subclass of ``ValueError`` counts as one.

        >>> Case(args=(1,), expected=[1, 2.0]).judge([1, 2.0000000001], ())
        True
        >>> Case(args=(1,), raises="ValueError").judge(None, ("TypeError", "Exception"))
        False
        """
        if self.raises is not None:
            return self.raises in raised
        return not raised and _equal(returned, self.expected)


class Task(BaseModel):
    """A coding task: what the user asks for, a reference solution and the hidden cases."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    signature: str = Field(description="as users write it: `slugify(s)`")
    prompt: str = Field(description="the user's request, one message")
    reference: str = Field(description="source of a solution that passes every case")
    cases: tuple[Case, ...] = Field(min_length=1)
    group: Group = Field("shipped", description="shipped, easy, or held_out (evals only)")
    visible: tuple[Case, ...] = Field(
        (),
        description="cases a repository's own tests show (the agent world's `run_tests`), "
        "never with a hidden case's arguments",
    )

    @model_validator(mode="after")
    def _well_formed(self) -> Task:
        match = _SIGNATURE.fullmatch(self.signature)
        if match is None:
            raise ValueError(f"signature {self.signature!r} is not `name(params)`")
        arity = len([p for p in match["params"].split(",") if p.strip()])
        for case in (*self.cases, *self.visible):
            if len(case.args) != arity:
                raise ValueError(f"{self.signature}: a case has {len(case.args)} arguments")
        hidden = {repr(case.args) for case in self.cases}
        if any(repr(case.args) in hidden for case in self.visible):
            raise ValueError(f"{self.signature}: a visible case gives a hidden case away")
        if f"`{self.signature}`" not in self.prompt:
            raise ValueError(f"the prompt of {self.signature} does not name it")
        return self

    @property
    def function(self) -> str:
        """The name the code must define."""
        return self.signature.partition("(")[0]


def _equal(got: object, want: object) -> bool:
    """``got == want``, except that floats agree within ``FLOAT_TOLERANCE`` and a boolean
    equals only a boolean (``1 == True`` in Python, but ``is_prime`` must say True)."""
    if isinstance(got, bool) != isinstance(want, bool):
        return False
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_equal(g, w) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, float) and isinstance(got, int | float) and not isinstance(got, bool):
        return math.isclose(got, want, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
    return bool(got == want)


def parse_tasks(text: str) -> tuple[Task, ...]:
    """Tasks from the TOML form of ``tasks.toml``; function names must be unique."""
    tasks = tuple(Task.model_validate(raw) for raw in tomllib.loads(text)["task"])
    names = [task.function for task in tasks]
    if len(set(names)) != len(names):
        raise ValueError("two tasks define the same function")
    return tasks


@functools.cache
def _all_tasks() -> tuple[Task, ...]:
    return parse_tasks(resources.files("agent").joinpath(TASKS_FILE).read_text("utf-8"))


def load_tasks(*groups: Group) -> tuple[Task, ...]:
    """The tasks of ``groups`` (default: the shipped ones), in file order (the file is read
    once per process)."""
    wanted = set(groups or ("shipped",))
    return tuple(task for task in _all_tasks() if task.group in wanted)


def get_task(function: str) -> Task:
    """The task, of any group, whose code defines ``function`` (``KeyError`` when there is
    none)."""
    for task in _all_tasks():
        if task.function == function:
            return task
    raise KeyError(function)
