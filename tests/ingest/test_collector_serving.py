"""The collector's serving pieces without a broker: the request front and delivery accounting."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from confluent_kafka import KafkaError
from fastapi import FastAPI, Response
from starlette.requests import Request

from ingest.collector.app import EVENTS_PATH, EventsFirst
from ingest.collector.kafka_sink import _Acks


def _kafka_error(text: str, code: int = KafkaError._MSG_TIMED_OUT) -> KafkaError:
    return KafkaError(code, text)


async def _call(app: Any, method: str, path: str) -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return messages[0]["status"], body


def test_events_go_straight_to_their_handler_and_the_rest_to_fastapi() -> None:
    api = FastAPI()

    @api.get("/health")
    async def health() -> dict[str, str]:
        return {"from": "fastapi"}

    async def handler(request: Request) -> Response:
        return Response(b'{"from": "handler"}', 200, media_type="application/json")

    front = EventsFirst(api, handler)
    assert asyncio.run(_call(front, "POST", EVENTS_PATH)) == (200, b'{"from": "handler"}')
    assert orjson.loads(asyncio.run(_call(front, "GET", "/health"))[1]) == {"from": "fastapi"}
    status, _ = asyncio.run(_call(front, "GET", EVENTS_PATH))  # another method: FastAPI's answer
    assert status == 404


def test_a_failing_handler_answers_500_with_a_reason() -> None:
    async def handler(request: Request) -> Response:
        raise RuntimeError("boom")

    status, body = asyncio.run(_call(EventsFirst(FastAPI(), handler), "POST", EVENTS_PATH))
    answer = orjson.loads(body)
    assert status == 500 and answer["reason"] == "internal_error"
    assert set(answer) == {"reason", "detail", "request_id"} and len(answer["request_id"]) == 32


def test_a_request_resolves_on_its_last_report_with_the_first_error() -> None:
    async def scenario() -> tuple[bool, str | None]:
        acks = _Acks(asyncio.get_running_loop(), 3)
        acks.report(None)
        acks.report(_kafka_error("first"))
        done_before_last = acks.future.done()
        acks.report(_kafka_error("second"))
        return done_before_last, await acks.future

    assert asyncio.run(scenario()) == (False, "first")


def test_a_refused_record_is_said_in_one_sentence() -> None:
    async def scenario() -> str | None:
        acks = _Acks(asyncio.get_running_loop(), 1)
        acks.report(
            _kafka_error(
                "Broker: Topic authorization failed", KafkaError.TOPIC_AUTHORIZATION_FAILED
            )
        )
        await acks.future
        return acks.refused

    assert asyncio.run(scenario()) == (
        "Kafka refuses an anonymous client to write topic ?: no ACL allows it."
    )


def test_records_never_produced_count_as_reported() -> None:
    async def scenario() -> str | None:
        acks = _Acks(asyncio.get_running_loop(), 5)
        acks.report(None)
        acks.report(None)
        acks.cancel_unproduced(3)
        return await asyncio.wait_for(acks.future, 1)

    assert asyncio.run(scenario()) is None


def test_a_report_after_the_loop_closed_is_harmless() -> None:
    loop = asyncio.new_event_loop()
    acks = _Acks(loop, 1)
    acks.future.add_done_callback(lambda _: None)  # set_result must schedule: the loop refuses
    loop.close()
    acks.report(None)
    assert acks.remaining == 0
