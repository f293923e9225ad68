"""The warehouse root on any fsspec filesystem: durable, atomic file writes and listings.

On a local disk a file is written under a temporary name in its final folder, flushed and
``fsync``-ed, renamed over the final name, and the folder is ``fsync``-ed: a reader sees the old
file or the new one, never half of one, and a crash right after :meth:`Store.write_parquet`
returns cannot lose it. On an object store (``s3://``, ``gs://``, ``memory://`` ...) one PUT is
already atomic and durable when it returns, so the object is written under its final name:
a rename there would be a copy and a delete.
"""

from __future__ import annotations

import io
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import polars as pl
from fsspec.implementations.local import LocalFileSystem

from infra.durable import fsync_dir
from warehouse.layout import PartFile, join, parse_part


class Store:
    """One warehouse root (a folder or a URL)."""

    def __init__(self, root: str) -> None:
        self.fs, path = fsspec.core.url_to_fs(root)
        self.local = isinstance(self.fs, LocalFileSystem)
        if self.local:
            path = os.path.abspath(path)
        self.root = path.rstrip("/") or "/"
        protocol = self.fs.protocol
        self.protocol = protocol if isinstance(protocol, str) else protocol[0]

    def path(self, relative: str) -> str:
        return join(self.root, relative)

    def url(self, relative: str) -> str:
        """A location other tools (DuckDB) can open: a plain path locally, else a URL."""
        path = self.path(relative)
        return path if self.local else f"{self.protocol}://{path.lstrip('/')}"

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Make ``data`` the content of ``relative``, atomically and durably."""
        final = self.path(relative)
        folder = final.rpartition("/")[0]
        self.fs.makedirs(folder, exist_ok=True)
        if not self.local:
            with self.fs.open(final, "wb") as out:
                out.write(data)
            return
        # Not ending in .parquet: a crash can leave it behind, and no glob of data files sees it.
        tmp = join(folder, f".{final.rpartition('/')[2]}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)
        fsync_dir(folder)

    def write_parquet(self, relative: str, frame: pl.DataFrame) -> None:
        buffer = io.BytesIO()
        frame.write_parquet(buffer, compression="zstd", statistics=True)
        self.write_bytes(relative, buffer.getvalue())

    def read_parquet(self, relative: str) -> pl.DataFrame:
        with self.fs.open(self.path(relative), "rb") as f:
            return pl.read_parquet(f)

    def read_bytes(self, relative: str) -> bytes | None:
        try:
            with self.fs.open(self.path(relative), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def exists(self, relative: str) -> bool:
        return self.fs.exists(self.path(relative))

    def remove(self, relative: str) -> None:
        try:
            self.fs.rm(self.path(relative))
        except FileNotFoundError:
            pass

    def files(self, under: str, suffix: str = ".parquet") -> Iterator[str]:
        """Paths relative to the root of every file below ``under`` ending in ``suffix``."""
        base = self.path(under)
        if not self.fs.exists(base):
            return
        prefix = self.root.rstrip("/") + "/"
        for path in sorted(self.fs.find(base)):
            name = path.rpartition("/")[2]
            if name.endswith(suffix) and not name.startswith("."):
                yield path[len(prefix) :] if path.startswith(prefix) else path.lstrip("/")

    def remove_stale_temporaries(self, under: str, older_than_s: float) -> int:
        """Delete temporary files a crash left behind (local roots only: object stores never
        write one). Young ones may belong to a write in progress and are kept."""
        base = Path(self.path(under))
        if not self.local or not base.exists():
            return 0
        cutoff = time.time() - older_than_s
        removed = 0
        for tmp in base.rglob(".*.tmp"):
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink(missing_ok=True)
                removed += 1
        return removed

    def parts(self, dataset: str) -> list[tuple[str, PartFile]]:
        """Every data file of a dataset with its parsed identity."""
        out = []
        for relative in self.files(dataset):
            part = parse_part(relative)
            if part is not None:
                out.append((relative, part))
        return out
