"""A llama.cpp gateway slower than its traffic refuses with a reason instead of queueing: a
request that finds every slot of its server busy for ``--slot-wait-s`` is answered 503
``overloaded`` with ``Retry-After`` (``serving.slot_ledger``), counted by its reason, and the
request that held the slot is answered whole. Through the official client, on a real server of
one slot. Without a slot wait (``0``, `rtrl run`'s gateways) a request waits as long as it takes
(``tests/serving/test_slot_ledger.py``).

Skipped only when the server binary is not built (``python -m llamacpp.build``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import openai
import pytest

from models.catalog import fetch, models_dir
from models.loading import LoadedBase, load_base
from tests.support.engine import acme_engine_gateway, needs_engine
from tests.support.gateway import Serve

pytestmark = needs_engine
WAIT_S = 0.5  # the slot wait under test
LONG = 192  # tokens of the answer holding the one slot (nearly greedy, counting: none stop early)


@pytest.fixture(scope="module")
def base() -> LoadedBase:
    return load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))


def _hold_and_ask(front: Serve, key: str) -> tuple[openai.types.Completion, float, object]:
    """A long answer holding the server's one slot, and, while it decodes, a short request:
    (the long answer, its seconds, what the short one got: its answer or its error)."""
    client = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)
    held: dict[str, object] = {}

    def hold() -> None:
        started = time.monotonic()
        held["answer"] = client.completions.create(
            model="default", prompt="1, 2, 3, 4, 5,", max_tokens=LONG, temperature=0.1, seed=1
        )
        held["seconds"] = time.monotonic() - started

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.3)  # the long request has the slot
    try:
        other: object = client.completions.create(model="default", prompt="Hi", max_tokens=2)
    except openai.APIStatusError as exc:
        other = exc
    holder.join(300)
    assert "answer" in held, held
    return held["answer"], held["seconds"], other  # type: ignore[return-value]


def test_a_request_no_slot_takes_in_time_is_refused_as_overloaded(
    base: LoadedBase, tmp_path: Path, kafka_bootstrap: str, topic_names
) -> None:  # noqa: ANN001
    front, key = acme_engine_gateway(tmp_path, base, kafka_bootstrap, topic_names.prefix, 1,
                                     LONG, ("--slot-wait-s", str(WAIT_S)))  # fmt: skip
    try:
        answer, seconds, refused = _hold_and_ask(front, key)
        metrics = front.metrics()
        client = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)
        again = client.completions.create(model="default", prompt="Hi", max_tokens=2)
    finally:
        assert front.stop() == 0, front.log.read_text()[-3000:]

    assert answer.usage is not None and answer.usage.completion_tokens == LONG, answer
    assert seconds > WAIT_S + 0.3, seconds  # the slot was held past the other's wait
    assert isinstance(refused, openai.InternalServerError), refused
    assert refused.status_code == 503 and refused.response.headers["retry-after"] == "10"
    body = refused.response.json()["error"]
    assert body["code"] == "overloaded" and body["type"] == "server_error", body
    assert "1 slot(s) stayed busy for 0.5 s" in body["message"], body
    assert metrics['rtrl_gateway_requests_refused_total{reason="overloaded"}'] == 1, metrics
    assert again.choices, again  # the slot free again: the next request is answered
