"""The console's HTTP app: the page, its snapshot as JSON, the snapshots as server-sent events,
and the routes that re-run a recorded decision from its evidence.

One refresher reads the sources every ``refresh_s`` (in a worker thread: DuckDB, file and HTTP
reads block) and wakes every open page's event stream when the content changed, so N open pages
cost one read per refresh, and a change reaches a page within one refresh plus the time to read.
``/api/snapshot`` serves the same content to scripts and to a page whose browser lost its event
stream (it reconnects by itself, and is sent the current snapshot at once).

A re-run is the command line's own (``rtrl gate evaluate --checkpoint ID --json``, ``rtrl
canary evaluate --checkpoint ID --json``) in a child process: the page shows exactly what an
auditor's terminal would, including whether the recorded decision was reproduced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from sse_starlette import EventSourceResponse, ServerSentEvent

from checkpoints.record import check_checkpoint_id
from console.settings import ConsoleSettings
from console.snapshot import Snapshots, as_json

log = logging.getLogger("rtrl.console")
STATIC = Path(__file__).with_name("static")
RERUN_TIMEOUT_S = 120
# the command that re-runs each kind of decision, and its exit codes that still answered
RERUN = {
    "gate": (["gate", "evaluate"], {0, 3, 4}),
    "canary": (["canary", "evaluate"], {0, 3}),
}


class Broadcast:
    """The latest snapshot's version, and a wake-up for every stream waiting on a newer one.

    An event per version, set and replaced when the next one is published: no lock is held
    while a stream waits, so a stream cancelled mid-wait (a page closed) can never leave the
    refresher waiting on it. Used on the event loop's thread only.
    """

    def __init__(self) -> None:
        self.version = 0
        self._next = asyncio.Event()

    def publish(self, version: int) -> None:
        self.version = version
        self._next.set()
        self._next = asyncio.Event()

    async def newer_than(self, version: int, timeout_s: float) -> int:
        """The version once it passes ``version``, or as it is after ``timeout_s``."""
        if self.version <= version:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._next.wait(), timeout_s)
        return self.version


def create_app(settings: ConsoleSettings) -> FastAPI:
    snapshots = Snapshots(settings)
    broadcast = Broadcast()
    stop = threading.Event()

    def refresh_forever(loop: asyncio.AbstractEventLoop) -> None:
        """On a thread of its own (DuckDB, file and HTTP reads block): read, then wake the
        streams on the event loop when the content changed."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                if snapshots.refresh():
                    loop.call_soon_threadsafe(broadcast.publish, snapshots.version)
            except Exception:  # a source that fails in an unforeseen way: said, then retried
                log.exception("refreshing the console's sources failed; retrying")
            stop.wait(max(0.0, settings.refresh_s - (time.monotonic() - started)))
        snapshots.close()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=refresh_forever, args=(loop,), name="console-reader",
                                  daemon=True)  # fmt: skip
        thread.start()
        try:
            yield
        finally:
            stop.set()
            await asyncio.to_thread(thread.join, 10)

    app = FastAPI(title="rtrl console", lifespan=lifespan,
                  description="The live page of a running loop, read-only.")  # fmt: skip
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    @app.get("/api/snapshot", summary="The page's content now, as JSON")
    async def snapshot() -> Response:
        return Response(as_json(snapshots.latest), media_type="application/json")

    @app.get("/api/events", summary="Server-sent events: a snapshot at once, then each new one")
    async def events() -> EventSourceResponse:
        async def stream() -> AsyncIterator[ServerSentEvent]:
            sent = -1
            while True:
                version = await broadcast.newer_than(sent, timeout_s=15.0)
                if version > sent:
                    sent = version
                    data = as_json(snapshots.latest).decode()
                    yield ServerSentEvent(data=data, event="snapshot", id=str(version))

        return EventSourceResponse(stream(), ping=10)

    @app.get("/api/rerun/{kind}/{checkpoint_id}",
             summary="Re-run a recorded gate or canary decision from its evidence")  # fmt: skip
    async def rerun(kind: str, checkpoint_id: str) -> Response:
        if kind not in RERUN:
            raise HTTPException(404, f"no decision kind {kind!r}: one of {sorted(RERUN)}")
        try:
            check_checkpoint_id(checkpoint_id)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        outcome = await run_rerun(kind, checkpoint_id, settings.registry_dir())
        return Response(orjson.dumps(outcome), media_type="application/json")

    return app


async def run_rerun(kind: str, checkpoint_id: str, registry: Path) -> dict[str, Any]:
    """The command's JSON answer with its exit code, or its error output when it failed."""
    command, answered = RERUN[kind]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rtrl.cli", *command, "--checkpoint", checkpoint_id,
        "--registry", str(registry), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RERUN_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise HTTPException(504, f"rtrl {' '.join(command)} ran past {RERUN_TIMEOUT_S} s") from None
    line = out.decode().strip().splitlines()
    if proc.returncode not in answered or not line:
        detail = (err.decode().strip().splitlines() or ["no output"])[-1]
        raise HTTPException(422, f"rtrl {' '.join(command)} exited {proc.returncode}: {detail}")
    return {"command": ["rtrl", *command, "--checkpoint", checkpoint_id],
            "exit_code": proc.returncode, "outcome": orjson.loads(line[-1])}  # fmt: skip
