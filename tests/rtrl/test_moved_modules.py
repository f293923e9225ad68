"""Module paths typed before `rtrl/` moved into rooms still name the same objects: a
``module:factory`` reader (``--eval-reader rtrl.token_reader:simulated``, a gate configuration, a
script) is resolved through ``release.candidate_evals.MOVED_MODULES``, with no module left at
the old path."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from release.candidate_evals import MOVED_MODULES, behaviour_reader, reader_factory
from rtrl.worlds.token_reader import SIMULATED, SIMULATED_AGENT, SimulatedBehaviour

READERS = ("simulated", "simulated_agent")


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
@pytest.mark.parametrize("attr", READERS)
def test_an_old_path_resolves_to_the_same_object(old: str, attr: str) -> None:
    new = importlib.import_module(MOVED_MODULES[old])
    assert reader_factory(f"{old}:{attr}") is getattr(new, attr)
    assert reader_factory(f"{MOVED_MODULES[old]}:{attr}") is getattr(new, attr)


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_the_old_path_is_no_module(old: str) -> None:
    """A table, not shim modules: the old path exists only where such strings are resolved."""
    path = REPO / old.replace(".", "/")
    assert not path.with_suffix(".py").exists() and not path.is_dir()


def test_the_old_eval_reader_reads_as_the_new() -> None:
    for new, old in ((SIMULATED, "rtrl.token_reader:simulated"),
                     (SIMULATED_AGENT, "rtrl.token_reader:simulated_agent")):  # fmt: skip
        assert behaviour_reader(old, 100) == behaviour_reader(new, 100)
    assert behaviour_reader(SIMULATED_AGENT, 100) == SimulatedBehaviour(100, clarify_tokens=8)
