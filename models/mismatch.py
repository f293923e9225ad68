"""The train/serve mismatch: how far the learner's distribution is from the one a serving engine
sampled from, per token, estimated from the sampled tokens alone.

A serving engine (llama.cpp on quantized weights, vLLM with its own kernels) reports the
behaviour log-probability ``log b(x)`` of each token it drew; the learner scores the same token as
``log p(x)``. With ``x ~ b``, both ``log b - log p`` (k1) and ``(r - 1) - log r`` with ``r = p / b``
(k3, never negative) are unbiased estimates of KL(b || p) per token; k3 has the lower variance.
The largest ``|log b - log p|`` says whether a few tokens carry the gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Mismatch:
    tokens: int
    kl_k1: float  # mean of log b - log p, nats per token
    kl_k3: float  # mean of (p/b - 1) - log(p/b), nats per token
    max_abs_diff: float  # largest |log b - log p| of one token

    def to_json_dict(self) -> dict[str, float | int]:
        return {
            "tokens": self.tokens,
            "kl_k1": self.kl_k1,
            "kl_k3": self.kl_k3,
            "max_abs_diff": self.max_abs_diff,
        }


def mismatch(behaviour: Sequence[Sequence[float]], learner: Sequence[Sequence[float]]) -> Mismatch:
    """Per-token mismatch over completions (one sequence of log-probabilities per completion,
    the same length in both).

    >>> m = mismatch([[-1.0, -0.5]], [[-1.0, -0.5]])
    >>> m.kl_k1, m.kl_k3, m.max_abs_diff
    (0.0, 0.0, 0.0)
    >>> round(mismatch([[math.log(0.5)]], [[math.log(0.25)]]).kl_k3, 4)  # r = 0.5
    0.1931
    """
    if len(behaviour) != len(learner):
        raise ValueError("one learner sequence per behaviour sequence")
    diffs: list[float] = []
    for i, (b, p) in enumerate(zip(behaviour, learner, strict=True)):
        if len(b) != len(p):
            raise ValueError(f"completion {i}: {len(b)} behaviour and {len(p)} learner tokens")
        diffs.extend(float(x) - float(y) for x, y in zip(b, p, strict=True))
    if not diffs:
        raise ValueError("no tokens")
    # r = exp(-d): (r - 1) - log r; a token the learner finds e^700 times likelier overflows
    k3 = [math.expm1(-d) + d if d > -700 else math.inf for d in diffs]
    return Mismatch(
        tokens=len(diffs),
        kl_k1=sum(diffs) / len(diffs),
        kl_k3=sum(k3) / len(k3),
        max_abs_diff=max(map(abs, diffs)),
    )
