"""The learner's two safeguards, tested without a model: advantages stay bounded by their
group's reward range (zeros when every reward was equal), and the KL penalty's gradient is that of
KL(pi || reference), checked against the exact KL by enumerating a small categorical
distribution (no sampling)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.advantages import leave_one_out
from trainer.learner import LearnerConfig
from trainer.losses import k3_kl, kl_penalty


def test_the_advantage_scale_must_be_positive():
    with pytest.raises(ValueError, match="adv_scale"):
        LearnerConfig(adv_scale=0.0)
    with pytest.raises(ValueError, match="scale"):
        leave_one_out([1.0, 0.0], 0.0)


rewards_st = st.floats(-5, 5, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    group=st.lists(rewards_st, min_size=1, max_size=12),
    scale=st.sampled_from([0.01, 0.1, 1.0]),
)
def test_advantages_stay_bounded_by_the_groups_reward_range(group, scale):
    """|advantage| <= (max - min reward of the group) / scale: a group whose rewards were all
    equal gives zeros, whatever their spread (a spread of 0 floored at 0.1 used to divide)."""
    adv = leave_one_out(group, scale)
    bound = (max(group) - min(group)) / scale
    assert all(math.isfinite(a) and abs(a) <= bound + 1e-9 for a in adv)


# --- the KL penalty, by enumeration -------------------------------------------------------
def _distributions(seed: int, vocab: int = 6):
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(vocab, generator=g, dtype=torch.float64, requires_grad=True)
    mu = torch.log_softmax(torch.randn(vocab, generator=g, dtype=torch.float64), 0)
    ref = torch.log_softmax(torch.randn(vocab, generator=g, dtype=torch.float64), 0)
    return theta, mu, ref


def _exact_gradient(theta, ref, forward: bool) -> torch.Tensor:
    log_pi = torch.log_softmax(theta, 0)
    if forward:  # KL(pi || ref)
        kl = (log_pi.exp() * (log_pi - ref)).sum()
    else:  # KL(ref || pi)
        kl = (ref.exp() * (ref - log_pi)).sum()
    (grad,) = torch.autograd.grad(kl, theta)
    return grad


def _expected_loss_gradient(theta, mu, per_token) -> torch.Tensor:
    """The gradient of E_{y ~ mu}[loss(y)], by summing over every y with its probability."""
    log_pi = torch.log_softmax(theta, 0)
    expected = (mu.exp() * per_token(log_pi)).sum()
    (grad,) = torch.autograd.grad(expected, theta)
    return grad


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("on_policy", [True, False])
def test_the_penalty_has_the_gradient_of_kl_pi_to_reference_from_behaviour_samples(seed, on_policy):
    theta, mu, ref = _distributions(seed)
    if on_policy:  # samples from pi itself (mu == pi, as at the update's first step)
        mu = torch.log_softmax(theta, 0).detach()
    want = _exact_gradient(theta, ref, forward=True)
    got = _expected_loss_gradient(theta, mu, lambda lp: kl_penalty(lp, mu, ref, math.inf))
    assert torch.allclose(got, want, atol=1e-10), (got, want)
    # and its expected value is the KL itself
    log_pi = torch.log_softmax(theta, 0)
    value = (mu.exp() * kl_penalty(log_pi, mu, ref, math.inf)).sum()
    exact = (log_pi.exp() * (log_pi - ref)).sum()
    assert float(value.detach()) == pytest.approx(float(exact.detach()), rel=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_plain_k3_as_a_loss_has_the_gradient_of_the_other_direction(seed):
    """What the penalty replaces: k3 on pi's own samples, used as a loss, descends KL(ref || pi)."""
    theta, _, ref = _distributions(seed)
    mu = torch.log_softmax(theta, 0).detach()
    plain = _expected_loss_gradient(theta, mu, lambda lp: k3_kl(lp, ref))
    assert torch.allclose(plain, _exact_gradient(theta, ref, forward=False), atol=1e-10)
    assert not torch.allclose(plain, _exact_gradient(theta, ref, forward=True), atol=1e-3)


def test_the_truncation_only_acts_above_the_cap_and_never_overflows():
    theta, mu, ref = _distributions(3)
    log_pi = torch.log_softmax(theta, 0)
    rho = (log_pi - mu).exp()
    cap = float(rho.max().detach()) + 0.1  # above every ratio: the same as no cap
    assert torch.allclose(kl_penalty(log_pi, mu, ref, cap), kl_penalty(log_pi, mu, ref, math.inf))
    capped = kl_penalty(log_pi, mu, ref, 1.0)
    assert torch.allclose(capped, rho.clamp(max=1.0) * k3_kl(log_pi, ref))
    # a token the behaviour policy all but never drew: the weight is the cap, not inf
    far = kl_penalty(torch.tensor([0.0]), torch.tensor([-1e4]), torch.tensor([-1.0]), 2.0)
    assert torch.isfinite(far).all() and float(far) == pytest.approx(2.0 * (math.exp(-1) + 1 - 1))
