#!/usr/bin/env python3
"""The gateway benchmark's peer: the least a Python gateway on the platform's HTTP stack can do.

``python bench/_passthrough.py UPSTREAM PORT`` serves every POST on PORT by sending its body,
unread, to the same path on UPSTREAM and answering with what came back: the same uvicorn
configuration as ``rtrl serve`` (``infra.http_server``), one pooled aiohttp session to the
upstream as the gateway keeps, and nothing else: no key check, no parsing, no rollout. What it
adds to the backend is the floor under what the gateway adds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402

from infra.http_server import http_server  # noqa: E402


def proxy(upstream: str) -> Any:
    session: aiohttp.ClientSession | None = None

    async def app(scope: dict, receive: Any, send: Any) -> None:
        nonlocal session
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            if session is not None:
                await session.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        if session is None:
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512))
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k != b"host"}
        method, url = scope["method"], upstream + scope["path"]
        async with session.request(method, url, data=body, headers=headers) as answer:
            content, status = await answer.read(), answer.status
            kind = answer.headers.get("content-type", "application/json")
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
