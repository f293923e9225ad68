"""The bounded deadline index against a model that remembers every deadline."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.deadlines import DeadlineIndex

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 60), st.sampled_from("abcdefghij")),
        st.tuples(st.just("advance"), st.integers(0, 8), st.just("")),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(ops=_ops, capacity=st.integers(2, 6))
def test_every_deadline_passed_is_popped_and_none_early(ops, capacity: int) -> None:
    index = DeadlineIndex(capacity)
    live: dict[str, int] = {}  # the owner's truth: each open id's current deadline
    now = 0
    for op, value, name in ops:
        if op == "push":
            due = now + value
            live[name] = due
            index.push(due, name)
            continue
        now += value
        if index.needs_rescan(now):
            index.reset(keep_through=now)
            for other, due in live.items():
                index.push(due, other)
        popped = set(index.pop_due(now))
        due_now = {n for n, due in live.items() if due <= now}
        assert due_now <= popped
        # a popped id that is not due now was pushed with an earlier deadline (stale): the
        # owner checks it and pushes it again
        for n in popped - due_now:
            if n in live:
                index.push(live[n], n)
        for n in due_now:
            del live[n]
        assert not index.needs_rescan(now)


def test_entries_sharing_the_cut_deadline_go_together_and_a_rescan_keeps_them_all() -> None:
    index = DeadlineIndex(capacity=2)
    for name in "abc":
        index.push(5, name)  # nothing earlier than the cut: all dropped
    assert len(index) == 0 and index.horizon == 4 and index.needs_rescan(5)
    index.reset(keep_through=5)
    for name in "abc":
        index.push(5, name)  # the rescan: every deadline the clock passed is kept
    index.push(6, "d")
    assert sorted(index.pop_due(5)) == ["a", "b", "c"] and not index.needs_rescan(5)


def test_many_equal_deadlines_are_not_sorted_again_on_every_push() -> None:
    index = DeadlineIndex(capacity=100)
    index.reset(keep_through=10)
    started = time.perf_counter()
    for i in range(100_000):
        index.push(7, f"i{i}")  # all at or below the floor: kept, over capacity
    assert len(index) == 100_000
    assert time.perf_counter() - started < 5  # quadratic would take minutes


def test_a_deferred_entry_is_kept_beyond_the_horizon() -> None:
    index = DeadlineIndex(capacity=2)
    for due, name in [(1, "a"), (2, "b"), (3, "c")]:
        index.push(due, name)
    assert index.horizon == 1
    index.retry_now(10, "z")
    assert index.pop_due(10) == ["a", "z"]


def test_capacity_below_two_is_refused() -> None:
    with pytest.raises(ValueError):
        DeadlineIndex(1)
