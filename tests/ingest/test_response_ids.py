"""The gateway's response ids (``ingest.contract.response_ids``): every interaction id the
contract allows and the id has room for comes back whole; nothing of another form is read as
one; every id fits a rollout's ``turn.call_id``; and the OTLP mapping takes a span's
interaction from such an id, and from no other."""

from __future__ import annotations

import base64
import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.collector.otlp_map import plan_export
from ingest.contract.response_ids import (
    KINDS,
    MAX_CARRIED_BYTES,
    MAX_RESPONSE_ID,
    interaction_of,
    response_id,
)

# what events-v1 allows in an id: any character but a control one (UTF-8: no lone surrogate)
CONTROL = [*map(chr, range(32)), "\x7f"]
printable = st.text(
    st.characters(codec="utf-8", blacklist_characters=CONTROL),
    min_size=1,
    max_size=128,
)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


@given(printable, st.sampled_from(KINDS))
def test_an_interaction_that_fits_comes_back_whole_and_every_id_fits_a_call_id(
    interaction: str, kind: str
) -> None:
    rid = response_id(interaction, kind)
    assert rid.startswith(kind + "-") and len(rid) <= MAX_RESPONSE_ID
    if len(interaction.encode()) <= MAX_CARRIED_BYTES:
        assert interaction_of(rid) == interaction
        assert re.fullmatch(rf"{kind}-[0-9a-f]{{16}}\.[A-Za-z0-9_-]+", rid)
    else:  # too long to carry: OpenAI's plain form, which names no interaction
        assert re.fullmatch(rf"{kind}-[0-9a-f]{{32}}", rid) and interaction_of(rid) is None


def test_the_limits_are_those_of_a_call_id() -> None:
    longest = "é" * (MAX_CARRIED_BYTES // 2)  # two bytes each
    rid = response_id(longest, "chatcmpl")
    assert len(rid) == MAX_RESPONSE_ID and interaction_of(rid) == longest
    assert interaction_of(response_id("x" * (MAX_CARRIED_BYTES + 1), "chatcmpl")) is None
    uuid = "019ad2f7-4a3b-7000-8000-000000000000"  # the gateway's own interaction ids
    assert len(response_id(uuid, "chatcmpl")) == 9 + 16 + 1 + 48
    # each call of one interaction has an id of its own
    assert len({response_id(uuid, "chatcmpl") for _ in range(1000)}) == 1000


def test_an_id_the_contract_would_refuse_is_not_carried() -> None:
    for refused in ("", "a\nb", "tab\there", "\x7f"):
        assert interaction_of(response_id(refused, "cmpl")) is None
    with pytest.raises(ValueError, match="kind"):
        response_id("run-7", "resp")


@pytest.mark.parametrize(
    "other",
    [
        "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",  # OpenAI's
        "chatcmpl-" + "0" * 32,  # vLLM's, and this gateway's plain form
        "resp-0123456789abcdef.cnVuLTc",  # another kind
        "chatcmpl-0123456789ABCDEF.cnVuLTc",  # upper-case hex
        "chatcmpl-0123456789abcde.cnVuLTc",  # 15 digits
        "chatcmpl-0123456789abcdef.cnVuLTc=",  # padded
        "chatcmpl-0123456789abcdef.cnVuLTd",  # non-canonical: the same bytes, stray low bits
        "chatcmpl-0123456789abcdef.cnVuLTc\n",
        "chatcmpl-0123456789abcdef.",
        "chatcmpl-0123456789abcdef.c",  # no whole byte
        "chatcmpl-0123456789abcdef." + b64("a\nb"),  # a control character
        "chatcmpl-0123456789abcdef.__4",  # not UTF-8
        "chatcmpl-0123456789abcdef." + b64("x" * (MAX_CARRIED_BYTES + 1)),  # too long
        "CHATCMPL-0123456789abcdef.cnVuLTc",
    ],
)
def test_another_form_is_refused(other: str) -> None:
    assert interaction_of(other) is None


@given(st.text(max_size=300))
def test_only_the_canonical_form_is_ever_read(text: str) -> None:
    interaction = interaction_of(text)
    if interaction is not None:
        kind, _, rest = text.partition("-")
        assert kind in KINDS and rest[16:] == "." + b64(interaction)


def _span(attributes: dict[str, Any]) -> dict[str, Any]:
    return {"signal": "span", "trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "chat",
            "start_time_unix_nano": 1_780_000_000_000_000_000,
            "end_time_unix_nano": 1_780_000_000_250_000_000, "resource": {"user.id": "u-1"},
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.response.model": "ck-7",
                           "gen_ai.conversation.id": "s-1", "gen_ai.usage.output_tokens": 12,
                           **attributes}}  # fmt: skip


def _interaction_of_span(attributes: dict[str, Any]) -> str:
    plan = plan_export([_span(attributes)], "acme", "2026-06-01T00:00:00Z", "events", "dlq")
    assert plan.accepted == 1, plan.error_message
    (record,) = plan.records
    event = orjson.loads(record.value)
    assert record.key == event["interaction_id"].encode()
    return str(event["interaction_id"])


def test_a_span_lands_in_the_interaction_its_gateway_response_id_carries() -> None:
    rid = response_id("run-7", "chatcmpl")
    assert _interaction_of_span({"gen_ai.response.id": rid}) == "run-7"
    # the interaction attribute, when the span has it, is what the team said: it wins
    both = {"gen_ai.response.id": rid, "rtrl.interaction.id": "i-explicit"}
    assert _interaction_of_span(both) == "i-explicit"
    # another server's id (or the plain form) is its own interaction, as before
    for other in ("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", response_id("x" * 80, "chatcmpl")):
        assert _interaction_of_span({"gen_ai.response.id": other}) == other
