"""The update's per-token losses, apart from the loop that applies them (``trainer.learner``):
PPO's clipped surrogate under a truncated importance weight, Schulman's k3 estimate of a KL,
and the KL penalty to a reference whose gradient is the forward KL's."""

from __future__ import annotations

import math

import torch


def ppo_token_loss(new: torch.Tensor, old: torch.Tensor, behaviour: torch.Tensor,
                   advantage: torch.Tensor, clip: float, tis_cap: float
                   ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Per token: the clipped surrogate's loss times the truncated importance weight, and
    whether the ratio was clipped.

    >>> lp = torch.log(torch.tensor([0.5, 0.5]))
    >>> loss, clipped = ppo_token_loss(lp, lp, lp, torch.tensor([2.0, 2.0]), 0.2, 2.0)
    >>> loss.tolist(), clipped.tolist()
    ([-2.0, -2.0], [False, False])
    >>> loss, clipped = ppo_token_loss(lp + 1.0, lp, lp, torch.tensor([1.0, 1.0]), 0.2, 2.0)
    >>> [round(v, 6) for v in loss.tolist()], clipped.tolist()  # ratio e, capped at 1.2
    ([-1.2, -1.2], [True, True])
    """
    ratio = torch.exp(new - old)
    weight = torch.exp(old - behaviour).clamp(max=tis_cap).detach()
    surrogate = torch.minimum(ratio * advantage, ratio.clamp(1.0 - clip, 1.0 + clip) * advantage)
    return -surrogate * weight, (ratio - 1.0).abs() > clip


def k3_kl(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Per token sampled from ``p``, an unbiased and non-negative estimate of KL(p || q):
    ``exp(log q - log p) - (log q - log p) - 1`` (Schulman's k3)."""
    diff = logq - logp
    return torch.exp(diff) - diff - 1.0


def kl_penalty(new: torch.Tensor, behaviour: torch.Tensor, reference: torch.Tensor,
               cap: float) -> torch.Tensor:  # fmt: skip
    """Per token drawn from the behaviour policy ``mu``, a loss whose value estimates
    KL(pi || ref) and whose gradient is that of KL(pi || ref), up to the truncation at ``cap``.

    The penalty the config documents is ``KL(pi || ref) = sum_y pi(y) (log pi(y) - log ref(y))``
    at each visited context. Its gradient (``sum_y pi grad log pi = 0`` removes the second term)
    is ``E_pi[(log pi - log ref) grad log pi]``, and with tokens drawn from ``mu``, not ``pi``,
    ``E_mu[rho (log pi - log ref) grad log pi]`` with ``rho = pi / mu``.

    Schulman's k3 with ``r = ref / pi``, ``k3 = r - log r - 1``, is non-negative and has
    ``E_pi[k3] = KL(pi || ref)``. Used alone as a loss on tokens treated as fixed samples, its
    gradient is ``E[(1 - ref / pi) grad log pi]``, which is ``-E_pi[(ref / pi) grad log pi]``,
    the gradient of KL(ref || pi): the other direction (and of neither when ``mu != pi``).
    Weighting it by ``rho`` *with* its gradient fixes both:
    ``grad(rho k3) = rho grad log pi k3 + rho (1 - ref / pi) grad log pi
    = rho (log pi - log ref) grad log pi``, exactly the term above, and
    ``E_mu[rho k3] = E_pi[k3] = KL(pi || ref)``, so the value reported is the KL too.

    ``rho`` is truncated at ``cap`` as the surrogate's importance weight is (``tis_cap``): the
    value is ``min(rho, cap) k3`` and the gradient ``min(rho, cap) (log pi - log ref) grad log
    pi`` (the excess over the cap is taken off in log space, detached, so ``rho`` never
    overflows). Below the cap, unbiased; above it, tokens ``pi`` already takes far more often
    than ``mu`` did weigh less than they should, in exchange for a bounded step.

    Contexts are taken as given: the gradient is that of the per-token KL at the visited
    contexts, not through how a change of ``pi`` would change which contexts are visited.

    >>> lp = torch.log(torch.tensor([0.5, 0.25]))
    >>> kl_penalty(lp, lp, lp, 2.0).tolist()  # pi == ref: no penalty
    [0.0, 0.0]
    """
    log_rho = new - behaviour
    if math.isfinite(cap):  # above the cap: the value log(cap), the gradient still log rho's
        capped = log_rho - log_rho.detach() + math.log(cap)
        log_rho = torch.where(log_rho.detach() > math.log(cap), capped, log_rho)
    return torch.exp(log_rho) * k3_kl(new, reference)
