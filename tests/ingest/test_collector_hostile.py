"""A corpus of hostile requests against a real collector (on the session broker): each is
refused with a typed 4xx (one error body: reason, detail, request id) within a second, and the
collector still accepts valid events afterwards.

The corpus covers compression bombs, pathological JSON, authentication tricks, oversized bodies
and requests the router refuses (404, 405): each row says what is sent and the status and reason
code it must get.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
import pytest

from infra.topics import TopicNames
from tests.support.collector import CollectorHandle, drain_events, make_collector, valid_event

MAX_BODY = 1024 * 1024
VALID = b'{"events": []}'


@dataclass(frozen=True)
class Hostile:
    name: str
    body: bytes | Callable[[], bytes]
    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"
    path: str = "/v1/events"
    auth: bool = True  # send the tenant's key

    def content(self) -> bytes:
        return self.body() if callable(self.body) else self.body


def _gzip_bomb() -> bytes:
    return gzip.compress(b"\0" * (32 * MAX_BODY), compresslevel=9)  # 32 MiB in ~32 KiB


def _gzip_of_gzip() -> bytes:
    return gzip.compress(gzip.compress(VALID))


def _nested(depth: int, open_: bytes, close: bytes) -> bytes:
    return b'{"events": [' + open_ * depth + close * depth + b"]}"


CORPUS = [
    # compression bombs and encodings
    Hostile("gzip bomb", _gzip_bomb, 413, "body_too_large", {"Content-Encoding": "gzip"}),
    Hostile("gzip inside gzip", _gzip_of_gzip, 400, "not_json", {"Content-Encoding": "gzip"}),
    Hostile(
        "truncated gzip",
        lambda: gzip.compress(VALID)[:-12],
        400,
        "bad_encoding",
        {"Content-Encoding": "gzip"},
    ),
    Hostile("not gzip at all", b"plain text", 400, "bad_encoding", {"Content-Encoding": "gzip"}),
    Hostile(
        "stacked encodings", VALID, 415, "unsupported_encoding", {"Content-Encoding": "gzip, gzip"}
    ),
    Hostile("brotli", VALID, 415, "unsupported_encoding", {"Content-Encoding": "br"}),
    # pathological JSON
    Hostile("arrays nested 200,000 deep", _nested(200_000, b"[", b"]"), 400, "too_deep"),
    Hostile(
        "objects nested 100,000 deep",
        _nested(100_000, b'{"a":', b"}")[:-2] + b"1" + b"}" * 100_000 + b"]}",
        400,
        "too_deep",
    ),
    Hostile("a bare array nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000, 400, "too_deep"),
    Hostile("empty body", b"", 400, "not_json"),
    Hostile("null", b"null", 400, "bad_batch"),
    Hostile("events null", b'{"events": null}', 400, "bad_batch"),
    Hostile("NaN", b'{"events": [NaN]}', 400, "not_json"),
    Hostile("invalid UTF-8", b'\xff\xfe{"events": []}', 400, "not_json"),
    Hostile("lone surrogate", b'{"events": ["\\ud800"]}', 400, "not_json"),
    Hostile("byte order mark", b"\xef\xbb\xbf" + VALID, 400, "not_json"),
    Hostile("trailing garbage", VALID + b"}}", 400, "not_json"),
    Hostile("a number of 200,000 digits", b"9" * 200_000, 400, "not_json"),
    # authentication tricks
    Hostile("no key", VALID, 401, "unauthorized", auth=False),
    Hostile("empty bearer", VALID, 401, "unauthorized", {"Authorization": "Bearer"}, auth=False),
    Hostile(
        "basic scheme", VALID, 401, "unauthorized", {"Authorization": "Basic YTpi"}, auth=False
    ),
    Hostile(
        "SQL in the key",
        VALID,
        401,
        "unauthorized",
        {"Authorization": "Bearer ' OR '1'='1"},
        auth=False,
    ),
    Hostile(
        "8 KiB key",
        VALID,
        401,
        "unauthorized",
        {"Authorization": "Bearer " + "k" * 8192},
        auth=False,
    ),
    Hostile(
        "key and a second token",
        VALID,
        401,
        "unauthorized",
        {"Authorization": "Bearer abc def"},
        auth=False,
    ),
    # oversized bodies
    Hostile("declared too large", b"x" * (MAX_BODY + 1), 413, "body_too_large"),
    Hostile(
        "streamed too large",
        lambda: b" " * (2 * MAX_BODY),
        413,
        "body_too_large",
        {"Transfer-Encoding": "chunked"},
    ),
    Hostile(
        "too many events",
        lambda: b'{"events": [' + b",".join([b"{}"] * 1001) + b"]}",
        413,
        "too_many_events",
    ),
    # what the router refuses
    Hostile("unknown path", VALID, 404, "not_found", path="/v1/event"),
    Hostile("wrong method", b"", 405, "method_not_allowed", method="GET"),
    Hostile("admin path", b"", 404, "not_found", method="GET", path="/../../etc/passwd"),
]


EVENT_LEVEL = [
    # A hostile event inside a well-formed batch is refused alone, with its reason, so that
    # the batch's other events are not lost (events-v1: one bad event never affects others).
    (b'"\xff\xfe"', "not_json"),
    (b"9" * 200_000, "too_large"),
    (orjson.dumps(valid_event(event_id="\0" * 1000)), "out_of_range"),
]


@pytest.fixture
def hostile_target(kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path):
    handle = make_collector(
        kafka_bootstrap,
        topic_names,
        tmp_path,
        max_body_bytes=MAX_BODY,
        rate_per_key=1000.0,
        burst_per_key=1000,
    )
    try:
        yield handle
    finally:
        handle.running.stop()


def _send(client: httpx.Client, handle: CollectorHandle, case: Hostile) -> httpx.Response:
    headers = {"Content-Type": "application/json", **case.headers}
    if case.auth:
        headers["Authorization"] = f"Bearer {handle.key}"
    content = case.content()
    if headers.get("Transfer-Encoding") == "chunked":

        def chunks():  # no Content-Length: the collector must count while it reads
            for i in range(0, len(content), 16384):
                yield content[i : i + 16384]

        return client.request(
            case.method, f"{handle.url}{case.path}", content=chunks(), headers=headers
        )
    return client.request(case.method, f"{handle.url}{case.path}", content=content, headers=headers)


def test_every_hostile_request_gets_a_typed_4xx_quickly_and_valid_events_still_pass(
    hostile_target: CollectorHandle,
) -> None:
    handle = hostile_target
    wrong = []
    with httpx.Client(timeout=10) as client:
        for case in CORPUS:
            started = time.monotonic()
            answer = _send(client, handle, case)
            took = time.monotonic() - started
            body = answer.json()
            if (answer.status_code, body.get("reason")) != (case.status, case.reason):
                wrong.append(f"{case.name}: {answer.status_code} {body}")
            if set(body) != {"reason", "detail", "request_id"}:
                wrong.append(f"{case.name}: body {body}")
            if answer.headers.get("x-request-id") != body.get("request_id"):
                wrong.append(f"{case.name}: header and body name other request ids")
            if took > 1.0:
                wrong.append(f"{case.name}: answered in {took:.2f} s")
    assert not wrong, "\n".join(wrong)
    for raw, reason in EVENT_LEVEL:
        answer = httpx.post(
            f"{handle.url}/v1/events",
            content=b'{"events": [' + raw + b"]}",
            headers={"Authorization": f"Bearer {handle.key}"},
            timeout=10,
        )
        result = answer.json()["results"][0]
        assert (answer.status_code, result["status"], result["reason"]) == (200, 400, reason), (
            raw[:40],
            answer.json(),
        )
    event = valid_event()
    answer = handle.post([event])
    assert answer.status_code == 200 and answer.json()["accepted"] == 1
    landed = drain_events(handle.config.bootstrap, handle.names.events, expected=1)
    assert [e["event_id"] for e in landed] == [event["event_id"]]


def test_a_caller_request_id_is_kept_and_a_hostile_one_replaced(
    hostile_target: CollectorHandle,
) -> None:
    kept = httpx.get(f"{hostile_target.url}/nope", headers={"X-Request-ID": "lb-1234-abcd"})
    assert kept.json()["request_id"] == "lb-1234-abcd" == kept.headers["x-request-id"]
    hostile = httpx.get(
        f"{hostile_target.url}/nope", headers={"X-Request-ID": "<script>alert(1)</script>"}
    )
    assert hostile.json()["request_id"] != hostile.request.headers["x-request-id"]
    assert len(hostile.json()["request_id"]) == 32
