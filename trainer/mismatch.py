"""The train/serve mismatch check: are a batch's behaviour log-probabilities those of the
distribution its tokens were drawn from?

The learner's importance weights compare the trainer's log-probabilities with the ones the
serving side recorded (``mu``). When the serving engine records another distribution than the
one it sampled from, every weight is wrong and the update is off-policy without knowing it. The
classic case is vLLM's default ``--logprobs-mode raw_logprobs``: the model's own softmax, before
temperature and top-p, for tokens sampled at temperature 0.7. The upstream must run with
``processed_logprobs``; this check is what catches it when it does not.

Before a round trains, a fixed sample of each batch's rollouts is scored by the served
checkpoint's weights (the parent, as loaded for the round: ``models.scoring``), at the sampling
parameters each rollout records. Per token, with ``d = log mu - log pi_served``:

* ``k1 = mean(d)`` estimates KL(mu || pi) and is >= 0 in expectation. Clearly *negative* is as
  wrong as clearly positive: the recorded log-probabilities are of no distribution the tokens
  came from (the raw log-probs of tokens drawn at T = 0.7 are lower than the sampled ones).
* ``k3 = mean(exp(-d) + d - 1)`` is non-negative token by token and estimates the same KL.

A batch is quarantined (not trained on; named in the candidate's record, so it is never offered
again) when ``|k1|`` or ``k3`` passes ``max_mismatch_kl`` nats per token. The default 0.02 sits
just above the 0.015 prime-rl asks of a healthy run (bf16 serving kernels against a float32
trainer: around 1e-3; the same code: 0), with a margin because this refuses data rather than
warns, and below what a wrong distribution gives (raw log-probs at T = 0.7 on the tiny model
with its logits scaled by 2, 4, 8: k3 0.029, 0.56, 0.016 with k1 -0.071; ``bench/RESULTS.md``).
On a model so near uniform that temperature hardly changes it, raw log-probs are not caught
(k3 0.005 on the tiny model as it is), and hardly matter to the importance weights either.
``LearnerConfig.max_mismatch_kl`` changes the limit; ``mismatch_sample=0`` turns the check off.
A round of many small batches (a service's: one every 15 s) scores at most
``mismatch_round_max`` rollouts in all, shared among its batches and at least
:data:`MIN_PER_BATCH` each (:func:`per_batch_sample`): a misrecording engine is far off on every
rollout (k3 0.03 to 0.6), not on a few.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from models.examples import Example
from models.mismatch import mismatch

if TYPE_CHECKING:
    from models.policy import CausalLMPolicy

__all__ = ["BatchMismatch", "check_batches", "mismatch_of", "per_batch_sample", "sample_of"]
MIN_PER_BATCH = 2  # rollouts of each batch the check scores, whatever the round's cap


@dataclass(frozen=True)
class BatchMismatch:
    """One batch's mismatch figures, per token, and why it is quarantined (None: it is not)."""

    k1: float
    k3: float
    tokens: int
    rollouts: int
    reason: str | None


def mismatch_of(behaviour: Sequence[Sequence[float]], scored: Sequence[Sequence[float]],
                limit: float) -> BatchMismatch:  # fmt: skip
    """The figures of rollouts whose recorded log-probabilities are ``behaviour`` and whose
    log-probabilities under the served weights are ``scored``, and the verdict at ``limit``.

    >>> mismatch_of([[-0.5, -1.0]], [[-0.5, -1.0]], 0.05).reason is None
    True
    >>> m = mismatch_of([[-2.0, -3.0]], [[-0.5, -1.0]], 0.05)  # recorded far below: raw
    >>> m.k1, m.reason.startswith("behaviour log-probs do not match")
    (-1.75, True)
    """
    if not any(behaviour):
        k1 = k3 = 0.0
        tokens = 0
    else:
        figures = mismatch(behaviour, scored)
        k1, k3, tokens = figures.kl_k1, figures.kl_k3, figures.tokens
    reason = None
    if not math.isfinite(k1) or not math.isfinite(k3) or abs(k1) > limit or k3 > limit:
        reason = (
            f"behaviour log-probs do not match the served weights: mismatch KL per token "
            f"k1 {k1:+.4f}, k3 {k3:.4f} nats over {tokens} tokens of {len(behaviour)} "
            f"rollouts (limit {limit:g}; an upstream vLLM must run with --logprobs-mode "
            "processed_logprobs)"
        )
    return BatchMismatch(k1, k3, tokens, len(behaviour), reason)


def sample_of(examples: Sequence[Example], n: int) -> list[Example]:
    """A fixed sample of ``n`` examples, chosen by a hash of each interaction id (a rerun scores
    the same ones)."""

    def key(e: Example) -> bytes:
        return hashlib.blake2b(e.rollout.interaction_id.encode(), digest_size=8).digest()

    return sorted(examples, key=key)[:n]


def per_batch_sample(sample: int, batches: int, round_max: int) -> int:
    """Rollouts the check scores in each of a round's ``batches``: ``sample``, unless the
    round's ``round_max`` (0: none) shared evenly is fewer, and never fewer than
    :data:`MIN_PER_BATCH`.

    >>> per_batch_sample(16, 1, 64), per_batch_sample(16, 21, 64), per_batch_sample(16, 40, 64)
    (16, 3, 2)
    >>> per_batch_sample(16, 21, 0), per_batch_sample(1, 40, 64)
    (16, 1)
    """
    if round_max <= 0 or batches <= 0:
        return sample
    return min(sample, max(MIN_PER_BATCH, round_max // batches))


def check_batches(policy: CausalLMPolicy, batches: Mapping[str, Sequence[Example]], sample: int,
                  limit: float, micro_batch: int = 8,
                  round_max: int = 0) -> dict[str, BatchMismatch]:  # fmt: skip
    """Each batch's mismatch, scoring ``sample`` of its rollouts with ``policy`` (the served
    weights), fewer where the round's ``round_max`` shared among its batches is fewer
    (:func:`per_batch_sample`)."""
    from models.scoring import score_examples

    out: dict[str, BatchMismatch] = {}
    each = per_batch_sample(sample, len(batches), round_max)
    for batch, examples in batches.items():
        chosen = sample_of(examples, each)
        scored = score_examples(policy, chosen, micro_batch)
        out[batch] = mismatch_of(
            [e.rollout.logprobs for e in chosen], [s.tolist() for s in scored], limit
        )
    return out
