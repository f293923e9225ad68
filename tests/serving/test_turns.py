"""An agent's calls through `rtrl serve` on the tiny model become one token-exact trajectory:
the second call's prompt ids begin with the first call's prompt and completion ids exactly
(the model's own tokens, never its text re-tokenised), with the interaction header and
without it (then recognised by the answer under the same user key); the second call joins
the first's interaction; an over-long spliced prompt is refused with
``context_length_exceeded``, never truncated. On the session's shared gateway (``served``):
its callers are this module's own user keys and interaction ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from transformers import AutoTokenizer

from tests.support.gateway import Serve

ASK = [{"role": "user", "content": "Write `mean(xs)` in Python."}]


def _ask(served: tuple[Serve, str], messages: list[dict[str, Any]], headers: dict[str, str],
         max_tokens: int = 12) -> httpx.Response:  # fmt: skip
    serve, key = served
    return httpx.post(
        f"{serve.url}/v1/chat/completions",
        json={"messages": messages, "max_tokens": max_tokens, "return_token_ids": True},
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=60,
    )


def _turn(answer: httpx.Response) -> tuple[list[int], list[int], str]:
    assert answer.status_code == 200, answer.text
    body = answer.json()
    choice = body["choices"][0]
    return body["prompt_token_ids"], choice["token_ids"], choice["message"]["content"]


@pytest.mark.parametrize("joined_by", ["user_key", "interaction_header"])
def test_the_second_call_extends_the_first_token_for_token(
    served: tuple[Serve, str], tiny_model: Path, joined_by: str
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    retokenised_differs = 0
    for attempt in range(8):
        headers = (
            {"X-Rtrl-User-Id": f"user-{joined_by}-{attempt}"}
            if joined_by == "user_key"
            else {"X-Rtrl-Interaction-Id": f"run-{attempt}"}
        )
        first = _ask(served, ASK, headers)
        prompt1, completion1, text1 = _turn(first)
        history = [*ASK, {"role": "assistant", "content": text1},
                   {"role": "user", "content": "Now test it."}]  # fmt: skip
        second = _ask(served, history, headers)
        prompt2, _, _ = _turn(second)
        assert prompt2[: len(prompt1) + len(completion1)] == prompt1 + completion1
        assert second.headers["X-Rtrl-Interaction-Id"] == first.headers["X-Rtrl-Interaction-Id"]
        # what a gateway that re-tokenised the history would have sent
        rendered = tokenizer.apply_chat_template(
            history, add_generation_prompt=True, tokenize=False
        )
        fresh = tokenizer(rendered, add_special_tokens=False).input_ids
        retokenised_differs += fresh[: len(prompt2)] != prompt2
    # the random model's answers re-tokenise differently (or end without their end token)
    # often enough that the check above is a real one
    assert retokenised_differs >= 1


def test_a_call_from_another_user_with_the_same_words_is_not_joined(
    served: tuple[Serve, str],
) -> None:
    first = _ask(served, ASK, {"X-Rtrl-User-Id": "alice"})
    _, _, text1 = _turn(first)
    history = [*ASK, {"role": "assistant", "content": text1}, {"role": "user", "content": "ok"}]
    before = served[0].metrics()
    other = _ask(served, history, {"X-Rtrl-User-Id": "bob"})
    assert other.status_code == 200
    assert other.headers["X-Rtrl-Interaction-Id"] != first.headers["X-Rtrl-Interaction-Id"]
    same = _ask(served, history, {"X-Rtrl-User-Id": "alice"})
    assert same.headers["X-Rtrl-Interaction-Id"] == first.headers["X-Rtrl-Interaction-Id"]
    after = served[0].metrics()
    for outcome in ("unmatched", "extends"):
        name = f'rtrl_gateway_calls_total{{outcome="{outcome}"}}'
        assert after[name] == before.get(name, 0.0) + 1


def test_an_over_long_spliced_prompt_is_refused_not_truncated(served: tuple[Serve, str]) -> None:
    first = _ask(served, ASK, {"X-Rtrl-User-Id": "carol"})
    _, _, text1 = _turn(first)
    history = [*ASK, {"role": "assistant", "content": text1}, {"role": "user", "content": "ok"}]
    refused = _ask(served, history, {"X-Rtrl-User-Id": "carol"}, max_tokens=32768)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (
        error["code"] == "context_length_exceeded" and "maximum context length" in error["message"]
    )


def test_an_over_long_fresh_prompt_is_refused_too(served: tuple[Serve, str]) -> None:
    """A first call (nothing to splice) whose prompt and completion budget pass the model's
    context (the tiny model's 8,192 positions) is a 400 as well: the engine is never left to
    cut the prompt or to run past its positions."""
    refused = _ask(served, ASK, {"X-Rtrl-User-Id": "dave"}, max_tokens=8192)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "context_length_exceeded"
    assert _ask(served, ASK, {"X-Rtrl-User-Id": "dave"}).status_code == 200
