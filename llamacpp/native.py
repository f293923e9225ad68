"""llama-server's native endpoints, asked so that every id is exact and every log-probability
is of the learner's distribution: the request bodies and the answers read back (pure).

Why not its OpenAI endpoints: they give no prompt ids, and their ``logprobs.content`` leaves out
every token that ends inside a multi-byte character (the server holds such a token back until
the character is whole, and its probability with it). So a completion is asked in three steps,
each exact by construction: ``POST /apply-template`` (the model's own chat template),
``POST /tokenize`` (``add_special`` and ``parse_special``, as its completion endpoint tokenises
text), and ``POST /completion`` with those ids as the prompt and ``return_tokens``.

**Behaviour log-probabilities.** By default llama.cpp reports each token's probability under the
model's plain softmax, *before* its sampler chain; with ``post_sampling_probs`` it reports the
probability in the candidates the chain left, after its final softmax: the distribution the
token was drawn from. Its default chain also runs top-k 40 and min-p 0.05 and applies the
temperature *after* top-p. ``models.sampling`` divides by the temperature first, then keeps the
nucleus; so the request names that chain, ``samplers: ["temperature", "top_p"]``, and asks for
the post-sampling probabilities. Only the recorded sampling parameters are sent.

**Under a grammar** (``grammar``, GBNF: ``llamacpp.gbnf``) our build samples grammar-first
(``llamacpp/patches/grammar-first.patch``): the grammar sets every token it refuses to -inf
before the chain, so with the chain exactly the temperature and ``top_p = 1`` the draw and its
reported probability are of the masked softmax, the distribution the learner replays. Any other
truncation in the chain would mix two distributions: :func:`chain_refusal` names what is
refused.

**Stop strings.** A whole ``/completion`` answer leaves out the probabilities of as many final
tokens as the stop string has when tokenised on its own. Streamed, the server sends every
sampled id with its probability, one event each: so a request with stop strings is asked
streamed and its events joined (:func:`joined_stream`).

Used by the gateway's llama.cpp backend (``serving.backends.llamacpp``) and the evals sampler
(``llamacpp.sampler``); an answer that is not what these endpoints give raises
:class:`LlamaCppError`, which each caller turns into its own error.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from models.generation import Generation
from models.rollout import ModelIdentity
from models.sampling import LOGPROB_FLOOR, SamplingParams

SAMPLERS = ["temperature", "top_p"]  # models.sampling's order: temperature, then the nucleus
_FINISH = {"eos": "stop", "word": "stop", "limit": "length"}


class LlamaCppError(RuntimeError):
    """llama-server answered something its native endpoints never give."""


# --- requests and answers (pure) -----------------------------------------------------------
def completion_body(
    prompt_ids: list[int], params: SamplingParams, grammar: str | None = None
) -> dict[str, Any]:
    """The native ``/completion`` request for ``prompt_ids`` sampled with ``params`` (under the
    GBNF ``grammar`` when given).

    >>> b = completion_body([1, 2], SamplingParams(temperature=0.7, top_p=0.9, max_tokens=8))
    >>> b["prompt"], b["n_predict"], b["samplers"], b["post_sampling_probs"], "grammar" in b
    ([1, 2], 8, ['temperature', 'top_p'], True, False)
    """
    body = {
        "prompt": prompt_ids,
        "n_predict": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "samplers": SAMPLERS,
        "stop": list(params.stop),
        "n_probs": 1,
        "post_sampling_probs": True,
        "return_tokens": True,
        "cache_prompt": True,
        "stream": False,
    }
    if grammar is not None:
        body["grammar"] = grammar
    return body


GRAMMAR_WITH_TOP_P = "grammar_with_top_p"
GRAMMAR_WITH_SAMPLER = "grammar_with_sampler"
# samplers llama-server would add to the chain, and each one's value that leaves it out
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "top_k": (None, 0, -1), "min_p": (None, 0, 0.0), "typical_p": (None, 1, 1.0),
    "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0),
    "repetition_penalty": (None, 1, 1.0), "repeat_penalty": (None, 1, 1.0),
    "logit_bias": (None, {}, []), "mirostat": (None, 0), "xtc_probability": (None, 0, 0.0),
    "dry_multiplier": (None, 0, 0.0), "top_n_sigma": (None, -1, -1.0),
}  # fmt: skip


def chain_refusal(top_p: float | None, extra: dict[str, Any]) -> tuple[str, str, str] | None:
    """Why a request under a grammar cannot be sampled exactly (reason code, message, the
    parameter), or None. Grammar-first with temperature alone draws from the masked softmax;
    ``top_p < 1`` keeps the nucleus of the masked distribution, which the learner's scoring
    (the nucleus of the model's, then the mask) is not: a mixture of two nuclei. Any other
    sampler (top-k, min-p, penalties, a logit bias) is another distribution still.

    >>> chain_refusal(1.0, {})
    >>> chain_refusal(0.9, {})[0], chain_refusal(None, {"top_k": 40})[0]
    ('grammar_with_top_p', 'grammar_with_sampler')
    >>> chain_refusal(None, {"presence_penalty": 0, "logit_bias": {}}) is None
    True
    """
    if top_p is not None and top_p < 1:
        message = f"top_p {top_p} with a tool_choice that needs a grammar: exact only at 1"
        return GRAMMAR_WITH_TOP_P, message, "top_p"
    for name, neutral in _NEUTRAL.items():
        if name in extra and extra[name] not in neutral:
            message = f"{name} with a tool_choice that needs a grammar: exact only without it"
            return GRAMMAR_WITH_SAMPLER, message, name
    return None


def token_ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and value and all(type(t) is int for t in value):
        return tuple(value)
    return None


def parse_native(
    answer: dict[str, Any],
    prompt_ids: tuple[int, ...],
    checkpoint_id: str = "",
    model: ModelIdentity | None = None,
) -> Generation:
    """The generation in a native ``/completion`` answer to ``prompt_ids``.

    >>> a = {"content": "ab", "stop_type": "eos", "tokens": [5, 6, 2],
    ...      "completion_probabilities": [{"id": 5, "token": "a", "prob": 0.5},
    ...      {"id": 6, "token": "b", "prob": 1.0}, {"id": 2, "token": "", "prob": 0.25}]}
    >>> g = parse_native(a, (1,))
    >>> g.token_ids, [round(x, 4) for x in g.logprobs], g.pieces, g.finish_reason
    ((5, 6, 2), [-0.6931, 0.0, -1.3863], ('a', 'b', ''), 'stop')
    >>> parse_native({**a, "tokens": [5, 7, 6, 2]}, (1,)).logprobs is None  # one held back
    True
    >>> held = {**a, "content": "a", "stop_type": "limit"}  # "b" held back, never sent
    >>> parse_native(held, (1,)).text, parse_native({**held, "stop_type": "word"}, (1,)).text
    ('ab', 'a')
    """
    text = str(answer.get("content") or "")
    tokens = token_ids(answer.get("tokens"))
    probs = answer.get("completion_probabilities")
    logprobs = pieces = None
    if tokens is not None and isinstance(probs, list) and len(probs) == len(tokens):
        values = [p.get("prob") if isinstance(p, dict) else None for p in probs]
        same = all(
            isinstance(p, dict) and p.get("id") == t for p, t in zip(probs, tokens, strict=True)
        )
        if same and all(isinstance(v, int | float) and 0 < v <= 1 for v in values):
            logprobs = tuple(max(math.log(float(v)), LOGPROB_FLOOR) for v in values)  # type: ignore[arg-type]
            joined = tuple(str(p.get("token", "")) for p in probs)
            whole = "".join(joined)
            if whole != text and answer.get("stop_type") != "word" and whole.startswith(text):
                # streamed, llama-server holds back text that could begin a stop string and,
                # stopped by the budget or its end token instead, never sends it: no stop string
                # was cut, so the answer is every token's text
                text = whole
            pieces = joined if whole == text else None
    timings = answer.get("timings")
    cached = timings.get("cache_n") if isinstance(timings, dict) else None
    return Generation(
        checkpoint_id,
        model,
        prompt_ids or None,
        tokens,
        logprobs,
        text,
        _FINISH.get(str(answer.get("stop_type")), "stop"),
        pieces,
        cached_tokens=cached if isinstance(cached, int) and cached >= 0 else None,
    )


def joined_stream(body: bytes) -> dict[str, Any]:
    """A streamed ``/completion`` answer (server-sent events) as the whole answer would be, but
    with the probability of every token the stream gave; ``tokens`` None when the stream left
    one out (its count of tokens predicted says more): llama-server sends no event, so no id,
    for a token that ends inside a character of several bytes, and such an answer is refused
    as a rollout (``missing_token_ids``), never recorded with guessed ids.

    >>> events = [{"content": "a", "tokens": [5], "stop": False,
    ...            "completion_probabilities": [{"id": 5, "token": "a", "prob": 0.5}]},
    ...           {"content": "", "tokens": [6], "stop": False,
    ...            "completion_probabilities": [{"id": 6, "token": "", "prob": 0.25}]},
    ...           {"content": "", "tokens": [], "stop": True, "stop_type": "word",
    ...            "tokens_predicted": 2}]
    >>> body = b"".join(b"data: " + orjson.dumps(e) + bytes([10, 10]) for e in events)
    >>> a = joined_stream(body)
    >>> a["content"], a["tokens"], len(a["completion_probabilities"]), a["stop_type"]
    ('a', [5, 6], 2, 'word')
    >>> joined_stream(body.replace(b'"tokens_predicted":2', b'"tokens_predicted":3'))["tokens"]
    """
    events = [orjson.loads(line[6:]) for line in body.splitlines() if line.startswith(b"data: ")]
    final = next((e for e in events if isinstance(e, dict) and e.get("stop") is True), None)
    if final is None:
        error = next((e["error"] for e in events if isinstance(e, dict) and "error" in e), None)
        raise LlamaCppError(f"llama-server's streamed /completion did not finish: {error}"[:300])
    parts = [e for e in events if isinstance(e, dict) and e.get("stop") is False]
    tokens = [t for e in parts for t in e.get("tokens") or []]
    return {
        "content": "".join(str(e.get("content") or "") for e in parts),
        "tokens": tokens if len(tokens) == final.get("tokens_predicted") else None,
        "completion_probabilities": [
            p for e in parts for p in e.get("completion_probabilities") or []
        ],
        "stop_type": final.get("stop_type"),
        "timings": final.get("timings"),
    }


def held_back(answer: dict[str, Any]) -> list[int]:
    """The positions of the last tokens of a streamed answer stopped by its budget whose text
    llama-server held back and never sent: text that could begin a stop string (" or" before
    "return") waits for the next token, and at the budget there is none. Each has its id and
    probability but an empty piece; the caller asks their text of ``/detokenize``
    (:func:`with_text`), so the answer's text is every id's, as no stop string was cut.

    >>> probs = [{"id": 5, "token": "a", "bytes": [97]}, {"id": 6, "token": "", "bytes": []}]
    >>> held_back({"stop_type": "limit", "tokens": [5, 6], "completion_probabilities": probs})
    [1]
    >>> held_back({"stop_type": "word", "tokens": [5, 6], "completion_probabilities": probs})
    []
    """
    tokens = answer.get("tokens") or []
    probs = answer.get("completion_probabilities") or []
    if answer.get("stop_type") != "limit" or len(tokens) != len(probs):
        return []
    held: list[int] = []
    for at in range(len(probs) - 1, -1, -1):
        p = probs[at]
        if not (isinstance(p, dict) and p.get("token") == "" and not p.get("bytes")):
            break
        held.insert(0, at)
    return held


def with_text(answer: dict[str, Any], pieces: dict[int, str]) -> dict[str, Any]:
    """The answer with the held-back tokens' text (by position) in its pieces and content.

    >>> a = {"content": "a", "completion_probabilities": [{"token": "a"}, {"token": ""}]}
    >>> b = with_text(a, {1: " or"})
    >>> b["content"], [p["token"] for p in b["completion_probabilities"]]
    ('a or', ['a', ' or'])
    """
    probs = [dict(p) for p in answer["completion_probabilities"]]
    for at, piece in sorted(pieces.items()):
        probs[at]["token"] = piece
    added = "".join(piece for _, piece in sorted(pieces.items()))
    return {**answer, "content": str(answer.get("content") or "") + added,
            "completion_probabilities": probs}  # fmt: skip


def is_llama_cpp(props: Any) -> bool:
    """Whether a ``GET /props`` answer is llama-server's.

    >>> is_llama_cpp({"default_generation_settings": {}, "build_info": "b1"}), is_llama_cpp({})
    (True, False)
    """
    return isinstance(props, dict) and "default_generation_settings" in props
