"""Run the stream join until stopped: build the app, guard its local state, hand it to Faust.

A RocksDB store on local disk may hold writes that never reached the changelog when the process
was killed; recovering on top of them could publish a revision the changelog does not know. So a
clean stop leaves a marker, and a start without one wipes the local tables and restores them from
the changelog (correct, slower). The memory store always restores from the changelog.
"""

from __future__ import annotations

import logging
import shutil

from streams.clean_stop import CLEAN_MARKER
from streams.settings import WorkerSettings

log = logging.getLogger("streams.worker")


def run_worker(settings: WorkerSettings, loglevel: str = "info") -> int:
    import faust

    from streams.app import build_app

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app, join = build_app(settings)
    if settings.metrics_port is not None:
        join.metrics.serve(settings.metrics_port)
        log.info("metrics on :%d/metrics", settings.metrics_port)
    marker = settings.data_dir / CLEAN_MARKER
    tabledir = app.conf.tabledir
    if settings.store == "rocksdb" and not marker.exists() and tabledir.exists():
        log.warning(
            "no clean shutdown recorded: wiping %s, tables restore from the changelog", tabledir
        )
        shutil.rmtree(tabledir)
    marker.unlink(missing_ok=True)
    log.info(
        "joining %s -> %s (late: %s, dlq: %s) as group %s, store %s, reward %s",
        settings.topics.events,
        settings.topics.rewards,
        settings.topics.late,
        settings.topics.dlq,
        settings.group_id,
        settings.store,
        settings.reward.reward_version,
    )
    worker = faust.Worker(app, loglevel=loglevel, redirect_stdouts=False)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    else:  # pragma: no cover - execute_from_commandline always raises SystemExit
        code = 0
    if code == 0 and _outbox_flushed(join.outbox):
        marker.touch()
    return code


def _outbox_flushed(outbox) -> bool:
    """Writes left after the last batch (a cleared pending list) are in the changelog."""
    try:
        outbox.durable_now(timeout_s=30)
    except Exception:  # noqa: BLE001 - then the next start restores from the changelog
        log.warning("last writes unacknowledged; the local store will be rebuilt")
        return False
    return True
