"""Which tokens a constraint allows at each position: for the sampler, step by step, and for
scoring, replayed over recorded tokens.

Masks are llguidance's packed form, ``int32 [..., ceil(V / 32)]`` (bit ``j`` of word ``i``
allows token ``32 i + j``); ``models.sampling.sampling_log_probs`` applies one to the logits
before the temperature and the nucleus, in the sampler and in scoring alike, so that the
recorded and the scored log-probabilities are of one distribution. Replay refuses a recorded
token the mask did not allow (:class:`ConstraintNotReplayable`): scored without its mask, it
would be another distribution's.

llguidance reads a tokenizer as the bytes of each token. It tells byte-level BPE (GPT-2 style)
from SentencePiece-style byte fallback by the decoder alone, and the tokenizer transformers
builds from SmolLM2's GGUF file has both in a decoder sequence (byte fallback first): read as
byte fallback, ``Ċ`` would be the bytes of that letter instead of a newline, and decoding fails
on the first one. :func:`grammar_tokenizer` hands llguidance the plain byte-level decoder when
the pre-tokenizer is byte-level, and checks every ordinary token's bytes against the tokenizer's
own decoding before any mask is trusted.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable, Sequence
from copy import copy
from typing import Any

import llguidance
import torch

from models.constraint import (
    Constraint,
    ConstraintNotReplayable,
    llguidance_grammar,
    unreplayable_reason,
)

_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple[int, tuple[int, ...]], Any]]
_CACHE = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def bitmask_width(vocab: int) -> int:
    return (vocab + 31) // 32


def _byte_level(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    if part.get("type") == "ByteLevel":
        return True
    return any(_byte_level(p) for p in part.get("pretokenizers") or part.get("decoders") or ())


def _llguidance_json(tokenizer: Any) -> str:
    """The tokenizer's definition as llguidance should read it (see the module's docstring)."""
    backend = copy(tokenizer.backend_tokenizer)
    backend.no_padding()
    backend.no_truncation()
    spec = json.loads(backend.to_str())
    if _byte_level(spec.get("pre_tokenizer")) and _byte_level(spec.get("decoder")):
        spec["decoder"] = {"type": "ByteLevel", "add_prefix_space": False,
                           "trim_offsets": False, "use_regex": True}  # fmt: skip
        if isinstance(spec.get("model"), dict) and spec["model"].get("byte_fallback"):
            spec["model"]["byte_fallback"] = False  # no <0xNN> tokens in a byte-level vocabulary
    return json.dumps(spec)


def _check_tokens(tokenizer: Any, grammar_tokenizer: Any) -> None:
    """Every ordinary token decodes to the same text in llguidance as in the tokenizer. One that
    is not UTF-8 on its own (``"\ufffd"``) may read as no bytes at all: llguidance never allows
    such a token (it keeps the byte 0xff, never part of UTF-8, as its own marker)."""
    special = set(tokenizer.all_special_ids) | {
        i for i, t in tokenizer.added_tokens_decoder.items() if t.special
    }
    ids = [i for i in range(len(tokenizer)) if i not in special]
    ours = tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=False)
    wrong = [i for i, text in zip(ids, ours, strict=True)
             if grammar_tokenizer.decode_str([i]) not in (text, "" if text == "\ufffd" else text)
             ]  # fmt: skip
    if wrong:
        first = tokenizer.convert_ids_to_tokens(wrong[0])
        raise ValueError(
            f"llguidance reads {len(wrong)} of {len(ids)} tokens as other text than the "
            f"tokenizer does (first: id {wrong[0]}, {first!r}): a grammar cannot be enforced "
            "with this tokenizer"
        )


def grammar_tokenizer(tokenizer: Any, vocab_size: int, end_ids: Iterable[int]) -> Any:
    """llguidance's tokenizer for a Hugging Face fast tokenizer, ``vocab_size`` logits wide (a
    model may have more rows than the tokenizer has tokens), ending on any of ``end_ids``.
    Built once per tokenizer object (about half a second for SmolLM2's 49k tokens, the check
    included) and shared by every policy that uses it."""
    ends = tuple(sorted(end_ids))
    with _LOCK:
        built = _CACHE.setdefault(tokenizer, {})
        if (vocab_size, ends) not in built:
            made = llguidance.LLTokenizer(
                _llguidance_json(tokenizer), n_vocab=vocab_size, eos_token=list(ends)
            )
            _check_tokens(tokenizer, made)
            built[(vocab_size, ends)] = made
        return built[(vocab_size, ends)]


class Matcher:
    """Where one completion stands in its constraint's grammar."""

    def __init__(self, tokenizer: Any, constraint: Constraint) -> None:
        reason = unreplayable_reason(constraint)
        if reason is not None:
            raise ConstraintNotReplayable(reason)
        grammar = llguidance_grammar(constraint.syntax, constraint.grammar)
        self._matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        self._width = bitmask_width(tokenizer.vocab_size)
        if self._matcher.is_error():
            raise ValueError(f"the constraint's grammar: {self._matcher.get_error()}")

    def allowed(self) -> torch.Tensor:
        """The packed mask ``int32 [W]`` of the tokens that may come next. llguidance's mask
        may be a word wider than the vocabulary (SmolLM2's 49,152 tokens get 1,537 words, not
        1,536): the words past the vocabulary are dropped."""
        packed = torch.frombuffer(bytearray(self._matcher.compute_bitmask()), dtype=torch.int32)
        return packed[: self._width]

    def consume(self, token: int) -> bool:
        """Advance past ``token``; False (and stuck in an error state) if the grammar refuses."""
        return bool(self._matcher.consume_token(token))


def allows(mask: torch.Tensor, token: int) -> bool:
    """Whether the packed mask ``[W]`` allows ``token``.

    >>> allows(torch.tensor([0, 1 << 3], dtype=torch.int32), 35), allows(torch.zeros(2, dtype=torch.int32), 35)
    (True, False)
    """  # noqa: E501
    return bool((int(mask[token // 32]) >> (token % 32)) & 1)


def replay(tokenizer: Any, constraint: Constraint, tokens: Sequence[int]) -> torch.Tensor:
    """The packed masks ``int32 [T, W]`` the sampler applied before each of ``tokens``;
    :class:`ConstraintNotReplayable` if this process cannot read the constraint or a token was
    not allowed where it stands."""
    if not tokens:
        raise ValueError("no tokens to replay")
    matcher = Matcher(tokenizer, constraint)
    rows = []
    for position, token in enumerate(tokens):
        mask = matcher.allowed()
        if (
            not 0 <= token < 32 * mask.numel()
            or not allows(mask, token)
            or not matcher.consume(token)
        ):
            raise ConstraintNotReplayable(
                f"token {token} at position {position} is not allowed by the recorded grammar"
            )
        rows.append(mask)
    return torch.stack(rows)
