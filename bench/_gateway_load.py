"""The load generator of ``bench/gateway_bench.py``: concurrent keep-alive clients in this
process (the gateway's own lean client, or aiohttp), the request bodies (a completion, a chat,
a chat with tools and a history of calls), and the latency quantile."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from infra.http_client import HttpPool

Post = Callable[[bytes, dict[str, str] | None], Awaitable[int]]  # body, headers -> status
Close = Callable[[], Awaitable[None]]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def aiohttp_client(url: str, key: str, concurrency: int,
                   path: str = "/v1/completions") -> tuple[Post, Close]:  # fmt: skip
    session = aiohttp.ClientSession(
        url,
        connector=aiohttp.TCPConnector(limit=concurrency),
        timeout=aiohttp.ClientTimeout(total=60),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )

    async def post(body: bytes, headers: dict[str, str] | None) -> int:
        async with session.post(path, data=body, headers=headers) as answer:
            await answer.read()
            return answer.status

    return post, session.close


def lean_client(url: str, key: str, concurrency: int,
                path: str = "/v1/completions") -> tuple[Post, Close]:  # fmt: skip
    pool = HttpPool(
        url,
        {"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        max_connections=concurrency,
        timeout_s=60,
    )

    async def post(body: bytes, headers: dict[str, str] | None) -> int:
        return (await pool.post(path, body, headers)).status

    return post, pool.close


CLIENTS = {"lean": lean_client, "aiohttp": aiohttp_client}


TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_tests", "description": "Run the tests",
     "parameters": {"type": "object", "properties": {}}}},
]  # fmt: skip
HISTORY: list[Any] = [
    {"role": "user", "content": "Fix mean(xs) in stats.py."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function",
     "function": {"name": "read_file", "arguments": '{"path": "stats.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "def mean(xs):\n    return sum(xs)"},
]  # fmt: skip


def request_body(endpoint: str, tools: bool, max_tokens: int, rendered: bool) -> bytes:
    """One request's body: a completion, or a chat (with the tools and a history of calls when
    ``tools``; ``rendered`` into plain messages in the default tool format instead)."""
    if endpoint == "completions":
        return orjson.dumps(
            {"model": "default", "prompt": "def mean(xs):", "max_tokens": max_tokens}
        )
    if not tools:
        messages: list = [HISTORY[0]]
        return orjson.dumps({"model": "default", "messages": messages, "max_tokens": max_tokens})
    if not rendered:
        return orjson.dumps(
            {"model": "default", "messages": HISTORY, "tools": TOOLS, "max_tokens": max_tokens}
        )
    from models.tool_format import render

    plain = render(HISTORY, TOOLS)
    return orjson.dumps({"model": "default", "messages": plain, "max_tokens": max_tokens})


async def load(url: str, key: str, requests: int, concurrency: int, max_tokens: int,
               latencies: list[float], client: str = "lean",
               body: bytes | None = None, path: str = "/v1/completions") -> float:  # fmt: skip
    """Send ``requests`` completions from ``concurrency`` clients; returns the seconds taken
    and appends each request's latency."""
    body = body or request_body("completions", False, max_tokens, False)
    post, close = CLIENTS[client](url, key, concurrency, path)
    try:

        async def one(headers: dict[str, str] | None = None) -> None:
            status = await post(body, headers)
            if status != 200:
                raise RuntimeError(f"{url} answered {status}")

        # connections opened before the clock starts
        await asyncio.gather(*(one() for _ in range(concurrency)))
        left = requests

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                started = time.perf_counter()
                await one({"X-Rtrl-Interaction-Id": str(uuid.uuid4())})
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started
    finally:
        await close()
