"""Attempt numbers on a parent, reserved atomically in the registry.

The gate splits its alpha over a parent's attempts (``release.gate.attempt_level``): the k-th
candidate trained from one parent is judged at a level that leaves room for the ones after it.
Counting the decisions already registered is not enough when two rounds on one parent run at
once (two trainers, or a round restarted while the first still runs): both count the same
decisions and both take attempt k, spending its alpha twice. So each round reserves its number
before it decides: ``<root>/.attempts/<parent>/<k>`` is created with ``O_CREAT | O_EXCL`` (one
process wins each number, on any POSIX file system) and holds the candidate's id. A candidate
that reserved a number keeps it (a round killed and resumed is judged as the same attempt); a
number reserved by a round that never registered stays spent, which only makes later attempts
stricter. Directories starting with a dot are not checkpoints (``CheckpointRegistry.list``).

Each line spends its own alpha: an organisation's candidates on a parent reserve under
``<root>/.attempts/<parent>/orgs/<org>/``, apart from the shared line's and from every other
organisation's, so that each organisation's gate keeps its stated error rate over its own
attempts (two organisations trained from the shared checkpoint each make their first attempt
on it, on users of their own).
"""

from __future__ import annotations

import os
from pathlib import Path

from checkpoints.record import check_checkpoint_id

ATTEMPTS_DIR = ".attempts"


def reserve_attempt(root: Path, parent_id: str, candidate_id: str, first: int = 1,
                    org_id: str | None = None) -> int:  # fmt: skip
    """``candidate_id``'s attempt number on ``parent_id`` in ``org_id``'s line (None: the shared
    line): the one it reserved before, else the lowest free number from ``first`` (1 + the
    line's decisions registered before reservations existed), reserved now.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> [reserve_attempt(root, "p-0", c) for c in ("p-1", "p-2", "p-1")]
    [1, 2, 1]
    >>> reserve_attempt(root, "p-0", "p-3", org_id="acme")  # acme's line: its own first attempt
    1
    """
    folder = Path(root) / ATTEMPTS_DIR / check_checkpoint_id(parent_id)
    if org_id is not None:
        folder = folder / "orgs" / check_checkpoint_id(org_id, "org_id")
    folder.mkdir(parents=True, exist_ok=True)
    check_checkpoint_id(candidate_id)
    for path in folder.iterdir():
        if path.name.isdigit() and path.read_text() == candidate_id:
            return int(path.name)
    number = max(first, 1)
    while True:
        try:
            fd = os.open(folder / str(number), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            number += 1
            continue
        try:
            os.write(fd, candidate_id.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return number
