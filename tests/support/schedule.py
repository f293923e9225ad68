"""The order in which the suite's test files reach the workers: longest first.

``scripts/test`` runs pytest-xdist with ``--dist loadfile`` and ``--no-loadscope-reorder``: a
worker that runs low on tests takes the next file in this order, so the order decides the
suite's tail. xdist's own order (most tests first) put the files of two or three long tests,
the whole-loop and llama.cpp ones, last, where one of them ran alone at the end. Longest first
is the classic greedy schedule, within 4/3 of the best for any number of workers.

The figures are each file's seconds in a full run on CI's two cores and two workers (setup,
call and teardown of its tests together; ``scripts/test``'s ``--durations``); a file not listed
goes after them, in xdist's order, since each of the others took under 15 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

LONGEST_FILES: dict[str, float] = {
    "tests/rtrl/test_code_world.py": 563,
    "tests/serving/test_llamacpp_switch.py": 480,
    "tests/rtrl/test_soak.py": 190,
    "tests/streams/test_streams_worker.py": 150,
    "tests/rtrl/test_org_world_run.py": 133,
    "tests/rtrl/test_run_loop.py": 120,
    "tests/rtrl/test_agent_world.py": 115,
    "tests/serving/test_llamacpp_shared.py": 75,
    "tests/rtrl/test_up.py": 70,
    "tests/serving/test_gateway_org_lines.py": 70,
    "tests/rtrl/test_simulate.py": 45,
    "tests/serving/test_llamacpp_revive.py": 45,
    "tests/trainer/test_training_window.py": 20,
    "tests/serving/test_llamacpp_tenant_cache.py": 20,
    "tests/warehouse/test_sink_broker_restart.py": 50,
    "tests/serving/test_rollout_outage.py": 55,
    "tests/models/test_gguf_cache.py": 50,
    "tests/infra/test_secure_broker.py": 40,
    "tests/models/test_constrained.py": 35,
    "tests/models/test_real_model.py": 30,
    "tests/serving/test_gateway_upstream.py": 30,
    "tests/trainer/test_trainer_resume.py": 25,
    "tests/trainer/test_trainer_train.py": 25,
    "tests/serving/test_gateway_outage.py": 25,
    "tests/rtrl/test_closing_ab_metrics.py": 17,
    "tests/rtrl/test_rounds_waiting.py": 40,
    "tests/release/test_canary_lifecycle.py": 16,
}


class Item(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=Item)


def file_of(item: Item) -> str:
    return item.nodeid.split("::", 1)[0]


def longest_first(items: Sequence[T]) -> list[T]:
    """``items`` with the listed files' tests first, longest file first, then every other file
    by its number of tests (xdist's order), each file's tests in their own order.

    >>> class T:
    ...     def __init__(self, nodeid): self.nodeid = nodeid
    >>> names = ["tests/a.py::x", "tests/a.py::y", "tests/rtrl/test_run_loop.py::z",
    ...          "tests/b.py::w", "tests/rtrl/test_code_world.py::v"]
    >>> [t.nodeid for t in longest_first([T(n) for n in names])]  # doctest: +NORMALIZE_WHITESPACE
    ['tests/rtrl/test_code_world.py::v', 'tests/rtrl/test_run_loop.py::z',
     'tests/a.py::x', 'tests/a.py::y', 'tests/b.py::w']
    """
    by_file: dict[str, list[T]] = {}
    for item in items:
        by_file.setdefault(file_of(item), []).append(item)
    first = sorted((f for f in by_file if f in LONGEST_FILES), key=lambda f: -LONGEST_FILES[f])
    rest = sorted((f for f in by_file if f not in LONGEST_FILES), key=lambda f: -len(by_file[f]))
    return [item for f in first + rest for item in by_file[f]]
