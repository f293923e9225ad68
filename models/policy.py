"""The policy: a Hugging Face causal language model behind the two calls the platform needs.

(1) **Sample** completions for a batch of prompts of different lengths, with the log-probability
of every sampled token under the distribution it was drawn from (``models.sampling``); the
serving side publishes them with the rollout as the *behaviour* log-probabilities. (2) **Score**
given completions: the log-probability of each of their tokens under the current weights, with
gradients when training. Both work on token ids, never on re-tokenised text: what was sampled is
exactly what is scored.

Under a decoding constraint (``models.constraint``: a tool call's grammar) a row is sampled from
the masked distribution, and scored under the same masks replayed over its tokens
(``models.grammar_mask``); rows without one cost nothing extra.

Sampling left-pads the prompts and decodes with the model's key-value cache; scoring right-pads
prompt + completion and reads only the completion's positions (``models.token_scorer``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from models import grammar_mask
from models.constraint import Constraint
from models.sampling import LOGPROB_FLOOR, SamplingParams, sampling_log_probs
from models.token_scorer import TokenScorer, core_model, score_batch

STOP = "stop"
LENGTH = "length"
TopTokens = tuple[tuple[int, float], ...]  # likeliest (token id, log-probability), in order
OnToken = Callable[[int, int, float, TopTokens], None]  # (row, token id, its lp, top), as drawn
_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>")


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]  # of each token, under the sampling distribution
    finish_reason: str  # "stop" (an end token or a stop string) or "length"
    text: str  # decoded, special tokens dropped, cut before a stop string
    top: tuple[TopTokens, ...] = ()  # per token, when asked: its distribution's likeliest


class Sampler(Protocol):
    """What the evals sample a checkpoint with: its transformers policy, or an engine on the
    same weights (``llamacpp.sampler``)."""

    @property
    def device(self) -> torch.device: ...  # where the generator passed to sample lives

    def chat_prompt(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> list[int]: ...

    def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               generator: torch.Generator) -> list[Completion]: ...  # fmt: skip


class CausalLMPolicy:
    """A causal LM and its tokenizer. ``model`` may be a peft model (LoRA)."""

    def __init__(self, model: nn.Module, tokenizer: Any) -> None:
        self.model: Any = model  # a transformers (or peft) model
        self.tokenizer = tokenizer
        self.scorer = TokenScorer(model)
        vocab = tokenizer.get_vocab()
        ends = {tokenizer.eos_token_id} | {vocab[t] for t in _END_TOKENS if t in vocab}
        generation_eos = getattr(
            getattr(core_model(model), "generation_config", None), "eos_token_id", None
        )
        if isinstance(generation_eos, int):
            ends.add(generation_eos)
        elif isinstance(generation_eos, list):
            ends.update(generation_eos)
        self.end_ids = frozenset(i for i in ends if i is not None)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(self.end_ids))

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def vocab_size(self) -> int:
        return int(core_model(self.model).get_output_embeddings().weight.shape[0])

    def to(self, device: torch.device | str) -> CausalLMPolicy:
        self.model.to(device)
        return self

    def chat_prompt(self, messages: Sequence[dict[str, Any]],
                    tools: Sequence[dict[str, Any]] | None = None) -> list[int]:  # fmt: skip
        """Token ids of a chat ready for the assistant's turn, by the model's own template
        (``tools`` for a template that renders them, ``models.tool_template``)."""
        text = self.tokenizer.apply_chat_template(
            list(messages), tools=list(tools) if tools else None, add_generation_prompt=True,
            tokenize=False,
        )  # fmt: skip
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def check_tokens(self, ids: Sequence[int], what: str) -> None:
        vocab = self.vocab_size
        if not ids:
            raise ValueError(f"{what} is empty")
        for token in ids:
            if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab:
                raise ValueError(f"{what} holds {token!r}: token ids are integers in [0, {vocab})")

    def grammar_tokenizer(self) -> Any:
        """llguidance's reading of this policy's tokenizer (built on first use, shared)."""
        return grammar_mask.grammar_tokenizer(self.tokenizer, self.vocab_size, self.end_ids)

    @torch.no_grad()
    def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               generator: torch.Generator, on_token: OnToken | None = None,
               top_n: int = 0, constraints: Sequence[Constraint | None] | None = None
               ) -> list[Completion]:  # fmt: skip
        """One completion per prompt, all decoded together; ``generator`` (on this policy's
        device) makes it reproducible.

        ``on_token(row, token_id, logprob, top)`` is called on this thread for every token as it
        is drawn (a row that has finished draws no more), before the next step is decoded, so
        that a server can stream a completion while the batch is still sampling. It only
        observes: the completions are the same with it or without it.

        ``top_n`` > 0: each token also comes with the ``top_n`` likeliest tokens of the
        distribution it was drawn from (after temperature and top-p: the one its log-probability
        is of), leaving out tokens that distribution cannot draw (outside the nucleus).

        ``constraints`` (one per prompt, None for a free row): a constrained row draws only
        tokens its grammar allows (masked before temperature and top-p; its log-probabilities
        are of that masked distribution) and ends when the grammar is complete and the model
        draws an end token; stop strings do not apply to it (they could cut the call short)."""
        for i, prompt in enumerate(prompts):
            self.check_tokens(prompt, f"prompt {i}")
        if constraints is not None and len(constraints) != len(prompts):
            raise ValueError(f"one constraint (or None) per prompt ({len(prompts)})")
        matchers = None
        if constraints is not None and any(c is not None for c in constraints):
            tokenizer = self.grammar_tokenizer()
            matchers = [None if c is None else grammar_mask.Matcher(tokenizer, c)
                        for c in constraints]  # fmt: skip
        was_training = self.model.training
        self.model.eval()
        try:
            return self._sample(prompts, params, generator, on_token, top_n, matchers)
        finally:
            self.model.train(was_training)

    def _sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                generator: torch.Generator, on_token: OnToken | None, top_n: int,
                matchers: list[grammar_mask.Matcher | None] | None
                ) -> list[Completion]:  # fmt: skip
        device, batch = self.device, len(prompts)
        width = max(map(len, prompts))
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long, device=device)
        mask = torch.zeros((batch, width), dtype=torch.long, device=device)
        for i, prompt in enumerate(prompts):  # left padding: every row ends at the same column
            ids[i, width - len(prompt) :] = torch.tensor(list(prompt), device=device)
            mask[i, width - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
        )
        tokens: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        tops: list[list[TopTokens]] = [[] for _ in range(batch)]
        finish: list[str | None] = [None] * batch
        ends = torch.tensor(sorted(self.end_ids), device=device)
        mask_width = grammar_mask.bitmask_width(self.vocab_size)
        last = positions[:, -1:]
        for _ in range(params.max_tokens):
            allowed = (
                None if matchers is None else _step_masks(matchers, finish, mask_width, device)
            )
            log_dist = sampling_log_probs(
                out.logits[:, -1], params.temperature, params.top_p, allowed
            )
            drawn = torch.multinomial(log_dist.exp(), 1, generator=generator)  # [B, 1]
            drawn_lp = log_dist.gather(-1, drawn).squeeze(-1).tolist()
            is_end = torch.isin(drawn.squeeze(-1), ends).tolist()
            top = _likeliest(log_dist, top_n) if top_n else [()] * batch
            for i, token in enumerate(drawn.squeeze(-1).tolist()):
                if finish[i] is not None:
                    continue
                tokens[i].append(token)
                logprobs[i].append(drawn_lp[i])
                if top_n:
                    tops[i].append(top[i])
                if on_token is not None:
                    on_token(i, token, drawn_lp[i], top[i])
                matcher = None if matchers is None else matchers[i]
                if matcher is not None and not matcher.consume(token):
                    raise RuntimeError(f"row {i}: drew token {token}, which its mask refused")
                if is_end[i] or (
                    params.stop and matcher is None and self._hits_stop(tokens[i], params.stop)
                ):
                    finish[i] = STOP
            if all(f is not None for f in finish):
                break
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], 1)
            last = last + 1
            out = self.model(
                input_ids=drawn,
                attention_mask=mask,
                position_ids=last,
                past_key_values=out.past_key_values,
                use_cache=True,
            )
        stops = [params.stop if matchers is None or matchers[i] is None else ()
                 for i in range(batch)]  # fmt: skip
        return [
            Completion(tuple(t), tuple(lp), f or LENGTH, self._text(t, stop), tuple(k))
            for t, lp, f, k, stop in zip(tokens, logprobs, finish, tops, stops, strict=True)
        ]

    def _hits_stop(self, tokens: list[int], stop: Sequence[str]) -> bool:
        tail = self.tokenizer.decode(tokens[-16:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    def _text(self, tokens: list[int], stop: Sequence[str]) -> str:
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        cuts = [text.find(s) for s in stop if s in text]
        return text[: min(cuts)] if cuts else text

    def score(self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
              temperature: Sequence[float] | float = 1.0,
              top_p: Sequence[float] | float = 1.0, scorer: nn.Module | None = None,
              constraints: Sequence[Constraint | None] | None = None, pack: bool = True
              ) -> list[torch.Tensor]:  # fmt: skip
        """Per completion, the log-probability ``[T_i]`` of each of its tokens under this
        policy's sampling distribution at the given temperature/top-p (per row or for all) and
        under the masks of the row's constraint (None: unconstrained), replayed over its tokens
        (``ConstraintNotReplayable`` when that cannot be done). With gradients when grad mode is
        on; ``scorer`` is this policy's :class:`TokenScorer` as wrapped for training
        (accelerate), by default the plain one. A row that is a prefix of another (an agent
        run's earlier call) is read from that one's sequence unless ``pack`` is off
        (``models.token_scorer.carriers``)."""
        batch = score_batch(prompts, completions, self.pad_id, self.device, pack)
        n = len(prompts)
        temps = _per_row(temperature, n)
        tops = _per_row(top_p, n)
        per_token_t = torch.tensor([t for t, k in zip(temps, batch.lengths, strict=True)
                                    for _ in range(k)], device=self.device)  # fmt: skip
        per_token_p = torch.tensor([p for p, k in zip(tops, batch.lengths, strict=True)
                                    for _ in range(k)], device=self.device)  # fmt: skip
        flat = (scorer or self.scorer)(
            batch.input_ids,
            batch.attention_mask,
            batch.positions,
            batch.targets,
            per_token_t,
            per_token_p,
            self._replayed_masks(completions, constraints),
        )
        return list(flat.split(list(batch.lengths)))

    def _replayed_masks(self, completions: Sequence[Sequence[int]],
                        constraints: Sequence[Constraint | None] | None
                        ) -> torch.Tensor | None:  # fmt: skip
        """The packed masks ``[N, W]`` the completions were sampled under (all ones for a free
        row), or None when no row has a constraint."""
        if constraints is None or all(c is None for c in constraints):
            return None
        if len(constraints) != len(completions):
            raise ValueError(f"one constraint (or None) per completion ({len(completions)})")
        tokenizer = self.grammar_tokenizer()
        width = grammar_mask.bitmask_width(self.vocab_size)
        masks = [
            torch.full((len(c), width), -1, dtype=torch.int32)
            if k is None
            else grammar_mask.replay(tokenizer, k, c)
            for c, k in zip(completions, constraints, strict=True)
        ]
        return torch.cat(masks).to(self.device)


def _step_masks(matchers: list[grammar_mask.Matcher | None], finish: list[str | None],
                width: int, device: torch.device) -> torch.Tensor:  # fmt: skip
    """This step's packed masks ``[B, W]``: each unfinished constrained row's grammar's, all
    ones for the other rows (a finished row's draw is thrown away, but it must be a draw)."""
    masks = torch.full((len(matchers), width), -1, dtype=torch.int32)
    for i, (matcher, done) in enumerate(zip(matchers, finish, strict=True)):
        if matcher is not None and done is None:
            masks[i] = matcher.allowed()
    return masks.to(device)


def _likeliest(log_dist: torch.Tensor, n: int) -> list[TopTokens]:
    """Per row of ``log_dist [B, V]``, its ``n`` likeliest tokens that it can draw.

    >>> _likeliest(torch.log(torch.tensor([[0.2, 0.0, 0.8]])).clamp_min(LOGPROB_FLOOR), 3)
    [((2, -0.2231435328722), (0, -1.6094379425048828))]
    """
    values, ids = log_dist.topk(min(n, log_dist.shape[-1]), dim=-1)
    return [
        tuple((t, lp) for t, lp in zip(row_ids, row_lps, strict=True) if lp > LOGPROB_FLOOR)
        for row_ids, row_lps in zip(ids.tolist(), values.tolist(), strict=True)
    ]


def _per_row(value: Sequence[float] | float, n: int) -> list[float]:
    if isinstance(value, int | float):
        return [float(value)] * n
    if len(value) != n:
        raise ValueError(f"one value per row ({n}), got {len(value)}")
    return [float(v) for v in value]
