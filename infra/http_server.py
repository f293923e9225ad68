"""The one uvicorn configuration of the platform's HTTP services (the collector, ``rtrl serve``).

Both serve small JSON requests where the server's own Python per request is what costs:
uvicorn's C-backed HTTP parser (``httptools``) and event loop (``uvloop``) take less of it than
the pure-Python ``h11`` and the stock asyncio loop. Access logs are off (a line per request is
more work than the request), lifespan events on (the apps close their backends on shutdown).
"""

from __future__ import annotations

import gc
from typing import Any

import uvicorn

LOOP = "uvloop"
HTTP = "httptools"


def http_server(app: Any, host: str, port: int, **options: Any) -> uvicorn.Server:
    """A uvicorn server for ``app`` on ``host:port``; ``options`` add to or override the
    platform's settings (e.g. ``timeout_graceful_shutdown``)."""
    settings: dict[str, Any] = {
        "log_level": "warning",
        "access_log": False,
        "lifespan": "on",
        "loop": LOOP,
        "http": HTTP,
        **options,
    }
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, **settings))


def freeze_startup_heap() -> None:
    """Leave what the server was built from out of the garbage collector's full passes.

    Imports and start-up leave some 65,000 objects that live as long as the process (the
    gateway's), and a full collection walks them all: ~50 ms on the benchmark machine, which
    a request that arrives meanwhile would wait through. Frozen after start-up, they are never
    walked again (the same full collection then takes microseconds); what requests allocate is
    collected as before.
    """
    gc.collect()
    gc.freeze()
