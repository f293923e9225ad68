"""``infra.http_client`` against real servers: uvicorn on the platform's settings, and raw
asyncio servers that answer the ways an upstream can (chunked, until close, late, broken)."""

from __future__ import annotations

import asyncio
import datetime
import gc
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from infra.http_client import HttpError, HttpPool
from infra.http_server import http_server
from infra.ports import free_port_block

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class EchoApp:
    """Answers every request with what it saw; counts connections and requests in flight."""

    def __init__(self) -> None:
        self.clients: set[tuple[str, int]] = set()
        self.in_flight = self.most_in_flight = 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.clients.add(scope["client"])
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        if headers.get("x-wait"):
            await asyncio.sleep(float(headers["x-wait"]))
        self.in_flight -= 1
        answer = json.dumps(
            {
                "method": scope["method"],
                "path": scope["path"],
                "headers": headers,
                "body": body.decode(),
            }  # fmt: skip
        ).encode()
        status = int(headers.get("x-status", "200"))
        headers_out = [(b"content-type", b"application/json"), (b"x-echo", b"yes")]
        await send({"type": "http.response.start", "status": status, "headers": headers_out})
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[str, EchoApp]]:
    app, port = EchoApp(), free_port_block(1)
    server = http_server(app, "127.0.0.1", port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", app
    server.should_exit = True
    thread.join(10)


def run(coro_fn: Callable[[], Coroutine[Any, Any, Any]], loop: str = "asyncio") -> Any:
    if loop == "uvloop":
        return uvloop.run(coro_fn())
    return asyncio.run(coro_fn())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_requests_and_answers_over_one_kept_connection(echo, loop) -> None:
    url, app = echo
    before = len(app.clients)

    async def go() -> list[Any]:
        pool = HttpPool(url, {"Authorization": "Bearer k1", "Content-Type": "application/json"})
        answers = [await pool.post("/v1/x", b'{"n": %d}' % i, {"X-Extra": "e"}) for i in range(5)]
        got = await pool.request("GET", "/v1/models")
        await pool.close()
        return [*answers, got]

    answers = run(go, loop)
    for i, answer in enumerate(answers[:5]):
        assert answer.status == 200
        assert answer.header("X-Echo") == "yes" and answer.header("absent") is None
        seen = json.loads(answer.body)
        assert (seen["method"], seen["path"], seen["body"]) == ("POST", "/v1/x", f'{{"n": {i}}}')
        assert seen["headers"]["authorization"] == "Bearer k1"
        assert seen["headers"]["x-extra"] == "e"
        assert seen["headers"]["content-length"] == str(len(seen["body"]))
        assert seen["headers"]["host"] == url.removeprefix("http://")
    assert json.loads(answers[5].body)["method"] == "GET"
    assert len(app.clients) - before == 1  # six requests, one connection


def test_an_error_status_is_an_answer_not_an_exception(echo) -> None:
    async def go() -> Any:
        pool = HttpPool(echo[0])
        return await pool.post("/", b"", {"X-Status": "503"})

    assert run(go).status == 503


def test_the_base_path_prefixes_every_request(echo) -> None:
    async def go() -> Any:
        return await HttpPool(echo[0] + "/api/").post("/v1/completions", b"")

    assert json.loads(run(go).body)["path"] == "/api/v1/completions"


def test_at_most_max_connections_are_open(echo) -> None:
    url, app = echo
    app.most_in_flight = 0

    async def go() -> list[Any]:
        pool = HttpPool(url, max_connections=2)
        return await asyncio.gather(*(pool.post("/", b"", {"X-Wait": "0.1"}) for _ in range(6)))

    started = time.monotonic()
    answers = run(go)
    assert [a.status for a in answers] == [200] * 6
    assert app.most_in_flight == 2
    assert time.monotonic() - started >= 0.3  # three rounds of two


# --- raw servers ---------------------------------------------------------------------------
def raw_server(handler: Handler, body: Callable[[HttpPool, list], Awaitable[Any]],
               **pool_options: Any) -> tuple[Any, list]:  # fmt: skip
    """Run ``body(pool, connections)`` against a raw server that gives each connection to
    ``handler``; ``connections`` counts the connections it accepted."""
    connections: list[int] = []

    async def go() -> Any:
        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
            connections.append(1)
            try:
                await handler(reader, writer)
            finally:
                writer.close()

        server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = HttpPool(f"http://127.0.0.1:{port}", **pool_options)
        try:
            return await body(pool, connections)
        finally:
            await pool.close()
            server.close()

    return asyncio.run(go()), connections


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )  # fmt: skip
    return await reader.readexactly(length)


def test_a_chunked_answer_is_joined() -> None:
    async def handler(reader, writer) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"hel", b"lo ", b"world"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()  # keep the connection until the client closes it

    async def body(pool, _):
        return await pool.post("/", b"x")

    answer, _ = raw_server(handler, body)
    assert (answer.status, answer.body) == (200, b"hello world")


def test_an_answer_without_a_length_ends_when_the_server_closes() -> None:
    async def handler(reader, writer) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        await writer.drain()

    async def body(pool, connections):
        first = await pool.post("/", b"")
        second = await pool.post("/", b"")  # the first connection is spent: a new one
        return first, second, len(connections)

    (first, second, opened), _ = raw_server(handler, body)
    assert first.body == second.body == b"all of it"
    assert opened == 2


def test_a_kept_connection_the_server_closed_meanwhile_is_replaced() -> None:
    async def handler(reader, writer) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(0.05)  # then it closes the idle connection

    async def body(pool, connections):
        first = await pool.post("/", b"")
        await asyncio.sleep(0.2)
        second = await pool.post("/", b"")
        return first, second, len(connections)

    (first, second, opened), _ = raw_server(handler, body)
    assert first.body == second.body == b"ok"
    assert opened == 2


def test_the_close_race_on_a_reused_connection_is_retried_once() -> None:
    """The server takes the request on the kept connection and closes it unanswered (as one
    does that shuts an idle connection just as a request arrives): sent once more, fresh."""
    served = []

    async def handler(reader, writer) -> None:
        while True:
            await read_request(reader)
            served.append(1)
            if len(served) == 2:
                return  # closes unanswered
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async def body(pool, connections):
        answers = [await pool.post("/", b"") for _ in range(2)]
        return answers, len(connections)

    (answers, opened), _ = raw_server(handler, body)
    assert [a.body for a in answers] == [b"ok", b"ok"]
    assert opened == 2 and len(served) == 3


def test_a_fresh_connection_closed_unanswered_is_an_error_not_a_loop() -> None:
    async def handler(reader, writer) -> None:
        await read_request(reader)

    async def body(pool, connections):
        with pytest.raises(HttpError, match="closed before any answer"):
            await pool.post("/", b"")
        return len(connections)

    opened, _ = raw_server(handler, body)
    assert opened == 1


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b", "mid-answer"),
        (b"SMTP ready\r\n\r\n", "malformed"),
    ],
    ids=["cut-short", "malformed"],
)
def test_a_broken_answer_is_an_error(answer: bytes, error: str) -> None:
    async def handler(reader, writer) -> None:
        await read_request(reader)
        writer.write(answer)
        await writer.drain()

    async def body(pool, _):
        with pytest.raises(HttpError, match=error):
            await pool.post("/", b"")

    raw_server(handler, body)


def test_a_late_answer_times_out_and_never_reaches_the_next_request() -> None:
    async def handler(reader, writer) -> None:
        while True:
            got = await read_request(reader)
            if got == b"slow":
                await asyncio.sleep(0.5)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(got), got))
            await writer.drain()

    async def body(pool, connections):
        with pytest.raises(HttpError, match="no answer within 0.2 s"):
            await pool.post("/", b"slow")
        answer = await pool.post("/", b"fast")
        return answer, len(connections)

    (answer, opened), _ = raw_server(handler, body, timeout_s=0.2)
    assert answer.body == b"fast"
    assert opened == 2  # the timed-out connection was dropped, not reused


def test_no_server_is_an_error() -> None:
    async def go() -> None:
        with pytest.raises(HttpError, match="cannot connect"):
            await HttpPool(f"http://127.0.0.1:{free_port_block(1)}").post("/", b"")

    asyncio.run(go())


def test_what_would_split_the_head_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be sent"):
        HttpPool("http://h", {"X-A": "ok\r\nX-Injected: 1"})
    with pytest.raises(ValueError, match="not an http"):
        HttpPool("ftp://h")


def test_https_with_the_servers_certificate(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )  # fmt: skip
    )
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert_file, key_file)

    async def go() -> tuple[bytes, type]:
        async def handler(reader, writer) -> None:
            got = await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(got), got))
            await writer.drain()
            await reader.read()
            writer.close()

        server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=server_side)
        port = server.sockets[0].getsockname()[1]
        trusting = ssl.create_default_context(cafile=str(cert_file))
        answer = await HttpPool(f"https://127.0.0.1:{port}", ssl_context=trusting).post("/", b"tls")
        with pytest.raises(HttpError) as untrusted:  # the system's roots do not know it
            await HttpPool(f"https://127.0.0.1:{port}").post("/", b"tls")
        server.close()
        return answer.body, type(untrusted.value)

    body, error = asyncio.run(go())
    assert body == b"tls" and error is HttpError


def test_start_up_objects_leave_the_collectors_full_passes() -> None:
    from infra.http_server import freeze_startup_heap

    def full_pass_s() -> float:
        started = time.perf_counter()
        gc.collect()
        return time.perf_counter() - started

    walked = min(full_pass_s() for _ in range(3))
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 10_000  # this process's imports
        assert min(full_pass_s() for _ in range(3)) < walked / 5  # nothing frozen is walked
    finally:
        gc.unfreeze()
