"""A llama-server's prompt cache is its organisation's: on one server, a request of one
organisation never runs on another's cached prefix (``serving.slot_ledger``), seen through the
official client as ``usage.prompt_tokens_details.cached_tokens``. The same prompt asked again by
the same organisation reuses its cache; asked by another it is evaluated whole, so the time it
takes (or the count it reports) tells nothing of what another organisation sent.

Skipped only when the server binary is not built (``python -m llamacpp.build``).
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from models.catalog import fetch, models_dir
from models.loading import LoadedBase, load_base
from tests.support.engine import base_registry, engine_gateway, needs_engine
from tests.support.gateway import api_key
from tests.support.openai_schema import check

pytestmark = needs_engine
ASK: list = [{"role": "user", "content": "Write `clamp(x, lo, hi)` in Python, briefly."}]


@pytest.fixture(scope="module")
def base() -> LoadedBase:
    return load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))


def _cached(client: openai.OpenAI, user: str) -> tuple[int, int]:
    """(prompt tokens, those the engine reused from its cache) of one answer, whose body
    (``usage.prompt_tokens_details`` included) validates against OpenAI's schema."""
    raw = client.chat.completions.with_raw_response.create(
        model="default", messages=ASK, max_tokens=2, seed=1, user=user
    )
    check("CreateChatCompletionResponse", raw.http_response.json())
    usage = raw.parse().usage
    assert usage is not None and usage.prompt_tokens_details is not None
    return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0


def test_the_same_prompt_reuses_its_own_organisation_s_cache_only(
    base: LoadedBase, tmp_path: Path, kafka_bootstrap: str, topic_names
) -> None:  # noqa: ANN001
    registry = base_registry(tmp_path / "registry", base, "smol-0000")
    keys = tmp_path / "keys.sqlite"
    acme_key, globex_key = api_key(keys, "acme"), api_key(keys, "globex")
    front = engine_gateway(tmp_path, registry, keys, kafka_bootstrap, topic_names.prefix, 2, 8)
    try:
        acme = openai.OpenAI(base_url=f"{front.url}/v1", api_key=acme_key, max_retries=0)
        globex = openai.OpenAI(base_url=f"{front.url}/v1", api_key=globex_key, max_retries=0)
        order = [(acme, "a1"), (acme, "a2"), (globex, "g1"), (globex, "g2"), (acme, "a3")]
        seen = [_cached(client, user) for client, user in order]
    finally:
        assert front.stop() == 0, front.log.read_text()[-3000:]

    print("prompt tokens and cached tokens, acme acme globex globex acme:", seen)
    (n, first), (_, again), (_, foreign), (_, foreign_again), (_, back) = seen
    assert first == 0 and foreign == 0, seen  # nothing of acme's reaches globex's request
    # its own prompt again: all but the last token (llama.cpp evaluates one to sample)
    assert again >= n - 1 and foreign_again >= n - 1 and back >= n - 1, seen
