"""The suite's schedule names files that exist: a renamed long file would otherwise drop to the
back of the queue unnoticed."""

from tests.support.project import REPO
from tests.support.schedule import LONGEST_FILES


def test_every_longest_file_exists() -> None:
    missing = [name for name in LONGEST_FILES if not (REPO / name).is_file()]
    assert missing == []
