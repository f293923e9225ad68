"""A llama.cpp gateway slower than its traffic refuses with a reason instead of letting its
clients time out, on a real server of one slot, through the official client:

* a request that finds every slot busy for ``--slot-wait-s`` is answered 503 ``overloaded`` with
  ``Retry-After`` (``serving.slot_ledger``);
* a request not answered within ``--answer-deadline-s`` is answered 504 ``deadline_exceeded``
  with ``Retry-After``, and its generation stops: the next request has the slot at once
  (``serving.deadline``);

each counted by its reason. Without a slot wait (``0``, `rtrl run`'s gateways) a request waits as
long as it takes (``tests/serving/test_slot_ledger.py``).

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

pytestmark = needs_engine
WAIT_S = 0.5  # the slot wait
DEADLINE_S = 2.0  # the answer deadline
LONG = 512  # tokens asked of the answer holding the one slot (nearly greedy, counting)
REFUSED = 'rtrl_gateway_requests_refused_total{{reason="{}"}}'


@pytest.fixture(scope="module")
def base() -> LoadedBase:
    return load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))


def _asked(client: openai.OpenAI, **params: object) -> tuple[object, float]:
    """What a completion request got (its answer or its error), and its seconds."""
    started = time.monotonic()
    try:
        got: object = client.completions.create(model="default", **params)  # type: ignore[call-overload]
    except openai.APIStatusError as exc:
        got = exc
    return got, time.monotonic() - started


def test_a_request_not_served_in_time_is_refused_with_its_reason(
    base: LoadedBase, tmp_path: Path, kafka_bootstrap: str, topic_names
) -> None:  # noqa: ANN001
    extra = ("--slot-wait-s", str(WAIT_S), "--answer-deadline-s", str(DEADLINE_S))
    front, key = acme_engine_gateway(tmp_path, base, kafka_bootstrap, topic_names.prefix, 1,
                                     LONG, extra)  # fmt: skip
    try:
        client = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0)
        held: dict[str, tuple[object, float]] = {}
        holder = threading.Thread(
            target=lambda: held.setdefault(
                "long",
                _asked(client, prompt="1, 2, 3, 4, 5,", max_tokens=LONG, temperature=0.1, seed=1),
            )
        )
        holder.start()
        time.sleep(0.3)  # the long request has the slot
        waited, _ = _asked(client, prompt="Hi", max_tokens=2)
        holder.join(120)
        again, again_s = _asked(client, prompt="Hi", max_tokens=2)
        metrics = front.metrics()
    finally:
        assert front.stop() == 0, front.log.read_text()[-3000:]

    cut, cut_s = held["long"]
    assert isinstance(cut, openai.APIStatusError) and cut.status_code == 504, cut
    assert cut.response.json()["error"]["code"] == "deadline_exceeded", cut.response.text
    assert cut.response.headers["retry-after"] == "10" and DEADLINE_S <= cut_s < DEADLINE_S + 3
    assert isinstance(waited, openai.APIStatusError) and waited.status_code == 503, waited
    body = waited.response.json()["error"]
    assert body["code"] == "overloaded" and body["type"] == "server_error", body
    assert "1 slot(s) stayed busy for 0.5 s" in body["message"], body
    assert waited.response.headers["retry-after"] == "10"
    # the cut answer's generation stopped: the slot is free at once, not after its 512 tokens
    assert isinstance(again, openai.types.Completion) and again_s < 3.0, (again, again_s)
    assert metrics[REFUSED.format("overloaded")] == 1, metrics
    assert metrics[REFUSED.format("deadline_exceeded")] == 1, metrics
