"""The gateway's parts without a server: concurrent requests to the local backend are sampled in
one batch, each with its own prompt's completion; requests bound to different checkpoints never
share a batch; a stream's text pieces join to the text, multi-byte characters whole; a
streamed batch draws what an unstreamed one does, and shows each token's text as it comes."""

from __future__ import annotations

import torch

from checkpoints.weights import load_policy
from models.sampling import SamplingParams
from serving.backends.batcher import Batcher
from serving.generation import text_pieces
from serving.stream import Increments, rest_of
from tests.support.checkpoints import register_variant

PARAMS = SamplingParams(max_tokens=5)


def test_concurrent_requests_are_one_batch_and_checkpoints_never_mix(registry):
    old = load_policy(registry, registry.get("t-0000"))
    new = load_policy(registry, register_variant(registry, "t-0001", "t-0000", seed=5))
    prompts = [old.chat_prompt([{"role": "user", "content": f"Write `f{n}(x)`"}]) for n in range(6)]
    batcher = Batcher(seed=1, max_batch=16, max_wait_s=0.3)
    try:
        futures = [batcher.submit(old if n % 2 else new, prompts[n], PARAMS) for n in range(6)]
        done = [f.result(60) for f in futures]
    finally:
        batcher.close()
    assert batcher.sampled == 6 and batcher.batches == 2  # one per checkpoint
    for n, completion in enumerate(done):
        policy = old if n % 2 else new
        with torch.no_grad():
            scored = policy.score([prompts[n]], [list(completion.token_ids)])[0]
        assert torch.allclose(scored, torch.tensor(completion.logprobs), atol=1e-4)


def test_text_pieces_join_to_the_text_with_multibyte_characters_whole(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    text = "def é(x): return 'ü→ß' 🙂"
    ids = tuple(tokenizer(text, add_special_tokens=False).input_ids)
    pieces = text_pieces(lambda t: tokenizer.decode(list(t)), ids, text)
    assert len(pieces) == len(ids) and "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_a_streamed_batch_draws_what_an_unstreamed_one_does_and_passes_every_token(registry):
    """The per-token callback only observes: the same seed draws the same completions with it
    and without it, and each streamed request is passed exactly its own tokens, in order."""
    policy = load_policy(registry, registry.get("t-0000"))
    prompts = [
        policy.chat_prompt([{"role": "user", "content": f"Write `g{n}(x)`"}]) for n in range(3)
    ]
    params = SamplingParams(max_tokens=12)
    results = []
    seen: dict[int, list[tuple[int, float]]] = {0: [], 2: []}
    for streamed in (False, True):
        batcher = Batcher(seed=3, max_batch=16, max_wait_s=0.3)
        try:
            futures = [
                batcher.submit(
                    policy,
                    prompts[n],
                    params,
                    (lambda t, lp, top, n=n: seen[n].append((t, lp)))
                    if streamed and n in seen
                    else None,
                )
                for n in range(3)
            ]
            results.append([f.result(60) for f in futures])
        finally:
            batcher.close()
        assert batcher.batches == 1
    assert results[0] == results[1]
    for n, tokens in seen.items():
        assert [t for t, _ in tokens] == list(results[1][n].token_ids)
        assert [lp for _, lp in tokens] == list(results[1][n].logprobs)


def test_increments_show_only_text_that_stays_and_join_to_the_text(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))

    def decode(ids):
        return tokenizer.decode(list(ids), skip_special_tokens=True)

    text = "def é(x): return 'ü→ß' 🙂 # END here"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    for stops, final in (((), text), (("# END",), text[: text.index("# END")])):
        increments = Increments(decode, stops)
        shown = []
        for token in ids:
            piece = increments.push(token)
            assert "\ufffd" not in piece
            shown.append(piece)
            assert final.startswith(increments.sent)  # never a character that could change
        assert "".join(shown) == increments.sent
        assert increments.sent + rest_of(final, increments.sent) == final
    assert increments.sent == final  # a stop string is held back, never shown
