"""Making a file system change survive a crash: a rename is only durable once its directory is.

The warehouse (a Parquet file renamed into place) and the checkpoint registry (a checkpoint's
folder renamed into place) both write a temporary name, fsync it, rename it, then fsync the
directory that holds the new name.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(folder: str | Path) -> None:
    """Make a directory's entries (new files, a rename into it) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
