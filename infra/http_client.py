"""Keep-alive HTTP/1.1 connections to one origin, for a hot path that sends whole small requests
and reads whole answers: ``rtrl serve --upstream`` asking its upstream for each completion.

Why not aiohttp: on that path the client's own CPU is paid on every completion, and aiohttp's
request machinery (its timeouts, tracing, cookie jar, header multidicts, connector) cost
0.22-0.34 ms of CPU a request on the benchmark machine, three times what this connection
costs (0.07-0.11 ms), which writes the request head itself and parses the answer with
``httptools``, the C parser uvicorn already uses (``bench/http_client_bench.py``). This is the
narrow part of a client that path needs and nothing more: no redirects, cookies, proxies,
streamed bodies, compression or HTTP/2.

Connections are reused most-recent first and at most ``max_connections`` are open. A request
on a reused connection that the server had closed meanwhile (it shut an idle keep-alive
connection while the request was on its way, and answered nothing) is sent once more on a
fresh connection, as browsers and urllib3 do; any other failure is an :class:`HttpError`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools


class HttpError(Exception):
    """The exchange failed: no connection, the connection lost, a timeout, a malformed answer."""


class _Stale(HttpError):
    """A reused connection closed before any of the answer arrived."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]  # names lower-cased, in the order received
    body: bytes

    def header(self, name: str) -> str | None:
        wanted = name.lower().encode()
        for key, value in self.headers:
            if key == wanted:
                return value.decode("latin-1")
        return None


class _Connection(asyncio.Protocol):
    """One connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = False
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[Answer] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._received = False
        self._header_name = b""

    # --- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._answer is None:  # nothing asked: a server that talks out of turn
            self.close()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpError(f"malformed answer: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is None or self._answer.done():
            return
        if self._received and self._ends_at_close():
            self._finish(keep_alive=False)
        elif not self._received:
            self._fail(_Stale("the connection closed before any answer"))
        else:
            self._fail(HttpError(f"the connection closed mid-answer ({exc!r})"))

    # --- httptools callbacks ------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._finish(keep_alive=self._parser.should_keep_alive())

    # --- one exchange -------------------------------------------------------------------
    async def exchange(self, request: bytes) -> Answer:
        assert self.transport is not None and self._answer is None
        self._answer = asyncio.get_running_loop().create_future()
        self._headers, self._body, self._received = [], [], False
        self.transport.write(request)
        try:
            return await self._answer
        finally:
            self._answer = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _ends_at_close(self) -> bool:
        """An answer with neither a length nor chunks ends when the server closes."""
        names = {name for name, _ in self._headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _finish(self, keep_alive: bool) -> None:
        self.keep_alive = keep_alive
        if self._answer is not None and not self._answer.done():
            status = self._parser.get_status_code()
            self._answer.set_result(Answer(status, self._headers, b"".join(self._body)))

    def _fail(self, error: HttpError) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(error)


class HttpPool:
    """Requests to the origin of ``base_url`` (``http`` or ``https``; its path is a prefix of
    every request's), with ``headers`` on each; made and used on one event loop."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 512,
        timeout_s: float = 600.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = (ssl_context or ssl.create_default_context()) if url.scheme == "https" else None
        self._prefix = url.path.rstrip("/").encode()
        default_port = self._port == (443 if self._ssl else 80)
        host = self._host if default_port else f"{self._host}:{self._port}"
        if ":" in self._host:  # an IPv6 literal
            host = f"[{self._host}]" if default_port else f"[{self._host}]:{self._port}"
        self._head_tail = _header_lines({"Host": host, **(headers or {})})
        self._timeout_s = timeout_s
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []

    async def post(
        self, path: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> Answer:
        return await self.request("POST", path, body, headers)

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> Answer:
        head = b"%s %s%s HTTP/1.1\r\n" % (method.encode(), self._prefix, path.encode())
        extra = _header_lines(headers) if headers else b""
        request = b"%s%sContent-Length: %d\r\n\r\n%s" % (
            head + self._head_tail,
            extra,
            len(body),
            body,
        )
        async with self._slots:
            try:
                async with asyncio.timeout(self._timeout_s):
                    return await self._send(request)
            except TimeoutError:
                raise HttpError(f"no answer within {self._timeout_s:g} s") from None

    async def _send(self, request: bytes) -> Answer:
        connection = self._reuse()
        if connection is not None:
            try:
                return await self._on(connection, request)
            except _Stale:
                pass  # the server closed it idle: once more, fresh
        return await self._on(await self._connect(), request)

    async def _on(self, connection: _Connection, request: bytes) -> Answer:
        done = False
        try:
            answer = await connection.exchange(request)
            done = True
            return answer
        finally:
            if done and connection.keep_alive and not connection.closed:
                self._idle.append(connection)
            else:  # failed, cancelled (a late answer must not reach the next request) or spent
                connection.close()

    def _reuse(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                _Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl else None,
            )
        except OSError as exc:
            raise HttpError(f"cannot connect to {self._host}:{self._port}: {exc}") from None
        return connection

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def _header_lines(headers: Mapping[str, str]) -> bytes:
    """``Name: value`` lines; a name or value that would split the head is refused."""
    lines = []
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or ":" in name:
            raise ValueError(f"header {name!r} cannot be sent as given")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("latin-1")
