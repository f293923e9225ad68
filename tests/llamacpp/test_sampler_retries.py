"""The evals' llama.cpp sampler outlives a server that stalls or is restarting: a request that
times out or gets a 503 is sent again after a wait (every request is seeded, so a second send
gives the same answer), and the last failure is raised. Against a real HTTP server that stalls
its first answer past the client's timeout, then answers 503, then answers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from llamacpp import sampler as sampler_module
from llamacpp.sampler import EngineSampler


class _Flaky(BaseHTTPRequestHandler):
    """``plan``: what each POST gets in turn, "stall", "503" or "ok"; the rest get "ok"."""

    plan: list[str] = []
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.seen.append(self.path)
        what = self.plan.pop(0) if self.plan else "ok"
        if what == "stall":
            time.sleep(1.5)
        if what == "503":
            self.send_response(503)
            self.end_headers()
            return
        body = {"prompt": "<|im_start|>user\nhi", "tokens": [1, 2, 3]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(sampler_module, "RETRY_WAITS_S", (0.1, 0.1))  # the waits, not the retries
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Flaky.plan, _Flaky.seen = [], []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_stalled_then_unavailable_server_is_asked_again(flaky: str) -> None:
    _Flaky.plan = ["stall", "503"]
    sampler = EngineSampler(flaky, timeout_s=0.5)
    try:
        assert sampler.chat_prompt([{"role": "user", "content": "hi"}]) == [1, 2, 3]
    finally:
        sampler.close()
    assert _Flaky.seen == ["/apply-template"] * 3 + ["/tokenize"]


def test_a_server_that_never_answers_is_given_up_with_its_error(flaky: str) -> None:
    _Flaky.plan = ["stall"] * 3
    sampler = EngineSampler(flaky, timeout_s=0.5)
    try:
        with pytest.raises(httpx.ReadTimeout):
            sampler.chat_prompt([{"role": "user", "content": "hi"}])
    finally:
        sampler.close()
    assert _Flaky.seen == ["/apply-template"] * 3
