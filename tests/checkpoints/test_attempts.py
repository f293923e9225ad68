"""Attempt numbers reserved by rounds that run at once: every round gets its own number, and a
round resumed after a crash keeps the one it had."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from checkpoints.attempts import reserve_attempt


def _reserve(args: tuple[str, str]) -> int:
    root, candidate = args
    return reserve_attempt(Path(root), "tiny-0000", candidate, first=2)


def test_rounds_on_one_parent_at_once_each_get_their_own_attempt(tmp_path: Path) -> None:
    """Twelve processes reserve on one parent at the same time, after one decision registered
    before reservations existed (so numbers start at 2). Counting registered decisions alone,
    as the round did, gave every one of them attempt 2: the alpha of one attempt spent twelve
    times."""
    candidates = [f"tiny-{k:04d}" for k in range(1, 13)]
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        numbers = pool.map(_reserve, [(str(tmp_path), c) for c in candidates])
    assert sorted(numbers) == list(range(2, 14))
    again = [reserve_attempt(tmp_path, "tiny-0000", c) for c in candidates]
    assert again == numbers  # a resumed round is judged as the attempt it reserved
    assert reserve_attempt(tmp_path, "tiny-0001", "tiny-0013") == 1  # another parent: its own
