#!/usr/bin/env python3
"""The gateway benchmark's peer: the least a Python gateway on the platform's HTTP stack can do.

``python bench/_passthrough.py UPSTREAM PORT`` serves every POST on PORT by sending its body,
unread, to the same path on UPSTREAM and answering with what came back: the same uvicorn
configuration as ``rtrl serve`` (``infra.http_server``), the same keep-alive connections to
the upstream as the gateway keeps (``infra.http_client``), and nothing else: no key check, no
parsing, no rollout. What it adds to the backend is the floor under what the gateway adds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.http_client import HttpPool  # noqa: E402
from infra.http_server import http_server  # noqa: E402

NOT_FORWARDED = {b"host", b"content-length"}  # the pool writes its own


def proxy(upstream: str) -> Any:
    pool: HttpPool | None = None

    async def app(scope: dict, receive: Any, send: Any) -> None:
        nonlocal pool
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            if pool is not None:
                await pool.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        if pool is None:
            pool = HttpPool(upstream, max_connections=512)
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k not in NOT_FORWARDED}
        answer = await pool.request(scope["method"], scope["path"], body, headers)
        content, status = answer.body, answer.status
        kind = answer.header("content-type") or "application/json"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", kind.encode()),
                    (b"content-length", b"%d" % len(content)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})

    return app


if __name__ == "__main__":
    http_server(proxy(sys.argv[1].rstrip("/")), "127.0.0.1", int(sys.argv[2])).run()
