"""The connections to an upstream's servers (one pool for each origin), and the POST that every
upstream backend asks with: its error status passed on, an unreachable server a 502.

Held apart from the backends so that the OpenAI-compatible upstream, a llama-server upstream
and the ``--engine llama.cpp`` fleet (a server for each checkpoint, each with its own pool)
share one way of asking; keep-alive connections over ``infra.http_client``, whose CPU is paid on
every completion (``bench/RESULTS.md``, HTTP client).
"""

from __future__ import annotations

from typing import Any

import orjson

from infra.http_client import HttpError, HttpPool
from serving.backends.upstream_protocol import UpstreamError, bad_gateway

MAX_CONNECTIONS = 512  # kept open to each server, reused across requests


class UpstreamHttp:
    """``headers``: sent with every request (an API key); ``timeout_s``: how long an answer may
    take. Pools are made on the serving loop, on first use."""

    def __init__(self, headers: dict[str, str], timeout_s: float) -> None:
        self._headers = headers
        self._timeout_s = timeout_s
        self._pools: dict[str, HttpPool] = {}  # by origin

    def _pool(self, url: str) -> HttpPool:
        """The connections to ``url``, made on first use."""
        pool = self._pools.get(url)
        if pool is None:
            pool = self._pools[url] = HttpPool(
                url,
                {**self._headers, "Content-Type": "application/json"},
                MAX_CONNECTIONS,
                self._timeout_s,
            )
        return pool

    async def post_body(self, url: str, path: str, body: dict[str, Any]) -> bytes:
        """The body ``url`` answers ``body`` at ``path`` with; its error status passed on, an
        unreachable server a 502."""
        try:
            answer = await self._pool(url).post(path, orjson.dumps(body))
        except HttpError as exc:
            raise bad_gateway(f"upstream unreachable: {exc}"[:300]) from None
        if answer.status >= 400:
            raise UpstreamError(answer.status, answer.body)
        return answer.body

    async def post(self, url: str, path: str, body: dict[str, Any]) -> Any:
        """The JSON answer of ``url`` to ``body`` at ``path`` (None when it is no JSON)."""
        answer = await self.post_body(url, path, body)
        try:
            return orjson.loads(answer)
        except orjson.JSONDecodeError:
            return None

    async def forget(self, url: str) -> None:
        """Close the connections to ``url`` (a server that was stopped)."""
        pool = self._pools.pop(url, None)
        if pool is not None:
            await pool.close()

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()
