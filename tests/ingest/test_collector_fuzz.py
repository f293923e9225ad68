"""Fuzzing the collector on the real broker: schemathesis against its own OpenAPI document, and
property-based payloads. Whatever arrives: no 5xx, and every rejection carries a reason code."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode

from infra.topics import TopicNames
from ingest.contract import Reason
from tests.support.collector import CollectorHandle, make_collector, valid_event

# Bounded so the suite stays fast (about 90 schemathesis cases, 100 property cases in all).
SCHEMATHESIS_EXAMPLES = 30  # per mode (positive, negative) and operation
PROPERTY_EXAMPLES = 50
FUZZ = settings(
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
REASONS = {str(r) for r in Reason}


@pytest.fixture
def open_collector(
    kafka_bootstrap: str, topic_names: TopicNames, tmp_path: Path
) -> Iterator[CollectorHandle]:
    """Rate limits out of the way, so the fuzzers reach validation and Kafka."""
    handle = make_collector(
        kafka_bootstrap,
        topic_names,
        tmp_path,
        rate_per_key=10_000.0,
        burst_per_key=10_000,
        max_body_bytes=256 * 1024,
        max_events_per_batch=25,
    )
    try:
        yield handle
    finally:
        handle.running.stop()


def assert_answer_explains_itself(status: int, content: bytes) -> None:
    assert status < 500, content
    body = orjson.loads(content)
    if status == 200:
        assert len(body["results"]) == body["accepted"] + body["rejected"]
        for result in body["results"]:
            assert result["accepted"] or result["reason"] in REASONS, result
    else:
        assert body["reason"] and body["detail"], body


# A batch is 200 with a rejection per invalid event, so "negative data must get a 4xx" does not
# apply to event contents; every other built-in check does.
EXCLUDED_CHECKS = [checks.negative_data_rejection, checks.max_response_time]


def fuzz_operation(operation: Any, mode: GenerationMode, url: str, auth: dict[str, str]) -> None:
    is_post = operation.method.upper() == "POST"

    @settings(FUZZ, max_examples=SCHEMATHESIS_EXAMPLES)
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: Any) -> None:
        response = case.call(base_url=url, headers=auth)
        case.validate_response(response, excluded_checks=EXCLUDED_CHECKS, headers=auth)
        if is_post:
            assert_answer_explains_itself(response.status_code, response.content)

    call()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_schemathesis_finds_no_server_error(
    open_collector: CollectorHandle, mode: GenerationMode
) -> None:
    url = open_collector.url
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert {op.path for op in operations} >= {"/v1/events", "/livez", "/readyz"}
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and operation.method.upper() != "POST":
            continue  # nothing to make invalid in a GET without parameters
        fuzz_operation(operation, mode, url, {"Authorization": f"Bearer {open_collector.key}"})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated_events(draw: st.DrawFn) -> Any:
    """Mostly valid events with one field changed, dropped or added; sometimes anything."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    event = valid_event()
    action = draw(st.sampled_from(["keep", "change", "drop", "add", "payload"]))
    name = draw(st.sampled_from(sorted(event)))
    if action == "change":
        event[name] = draw(json_values)
    elif action == "drop":
        del event[name]
    elif action == "add":
        event[draw(st.text(min_size=1, max_size=12))] = draw(json_values)
    elif action == "payload":
        event["payload"] = draw(st.dictionaries(st.text(max_size=10), json_values, max_size=3))
    return event


@FUZZ
@given(st.data())
def test_property_payloads_get_an_answer_per_event(
    open_collector: CollectorHandle, data: st.DataObject
) -> None:
    events = data.draw(st.lists(mutated_events(), max_size=8))
    headers = {"Authorization": f"Bearer {open_collector.key}"}
    body = orjson.dumps({"events": events})
    if data.draw(st.booleans()):
        body, headers = gzip.compress(body), {**headers, "Content-Encoding": "gzip"}
    answer = httpx.post(f"{open_collector.url}/v1/events", content=body, headers=headers)
    assert_answer_explains_itself(answer.status_code, answer.content)
    assert answer.status_code == 200
    assert len(answer.json()["results"]) == len(events)


@FUZZ
@given(
    body=st.binary(max_size=200) | json_values.map(orjson.dumps),
    encoding=st.sampled_from([None, "gzip", "identity", "br"]),
)
def test_arbitrary_bodies_are_refused_with_a_reason(
    open_collector: CollectorHandle, body: bytes, encoding: str | None
) -> None:
    headers = {"Authorization": f"Bearer {open_collector.key}"}
    if encoding:
        headers["Content-Encoding"] = encoding
    answer = httpx.post(f"{open_collector.url}/v1/events", content=body, headers=headers)
    assert_answer_explains_itself(answer.status_code, answer.content)
