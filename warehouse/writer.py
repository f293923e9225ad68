"""A single background thread that runs write jobs in order, so consuming goes on while a flush
is parsed, written and committed (polars and Parquet release the GIL).

At most ``depth`` jobs wait; :meth:`BackgroundWriter.submit` blocks beyond that, which bounds
memory. A job that fails stops the writer, and the failure is raised in the caller's thread at
its next ``submit`` or ``drain``: a sink must crash (and restart from its committed offsets)
rather than go on without the files it thinks it wrote.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Job = Callable[[], None]
_STOP = object()


class BackgroundWriter:
    def __init__(self, depth: int = 1, name: str = "warehouse-writer") -> None:
        self._jobs: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is _STOP:
                    return
                if self._failure is None:
                    job()  # type: ignore[operator]
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self._failure = exc
            finally:
                self._jobs.task_done()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise RuntimeError("a background write failed") from self._failure

    def submit(self, job: Job) -> None:
        """Queue ``job`` after every earlier one; raises an earlier job's failure."""
        self._raise_failure()
        self._jobs.put(job)

    def drain(self) -> None:
        """Wait until every submitted job has run; raises a failure among them."""
        self._jobs.join()
        self._raise_failure()

    def close(self, timeout: float = 60.0) -> None:
        """Run what is queued, then stop the thread (waits at most ``timeout`` seconds)."""
        self._jobs.put(_STOP)
        self._thread.join(timeout)
