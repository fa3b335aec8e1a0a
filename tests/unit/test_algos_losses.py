"""Policy loss (ppo_clip) and value loss: reference values and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.algos import POLICY_LOSSES, value_loss
from turnrl.algos.losses import ppo_clip

FAST = settings(max_examples=25, deadline=None)
F64 = torch.float64


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=F64)


# Four sampled tokens with ratios r = [1, 1.5, 0.5, 1.1] and A = [1, 1, -1, -2], then one
# masked token holding garbage (inf log-prob, nan advantage).
RATIOS = [1.0, 1.5, 0.5, 1.1]
OLD = t([[-1.0, -2.0, -0.5, -3.0, 0.0]])
NEW = OLD + t([[math.log(r) for r in RATIOS] + [0.0]])
NEW[0, 4] = math.inf
ADV = t([[1.0, 1.0, -1.0, -2.0, math.nan]])
MASK = t([[1, 1, 1, 1, 0]])


def test_registered() -> None:
    assert POLICY_LOSSES.names() == ["cispo", "gspo", "pg", "ppo_clip"]
    assert POLICY_LOSSES["ppo_clip"] is ppo_clip


def test_ppo_clip_reference_values() -> None:
    # clip range [0.8, 1.2]; loss = -min(r A, clip(r) A):
    #   r=1,   A=1:  -min(1, 1)         = -1    (not clipped)
    #   r=1.5, A=1:  -min(1.5, 1.2)     = -1.2  (clipped)
    #   r=0.5, A=-1: -min(-0.5, -0.8)   =  0.8  (clipped)
    #   r=1.1, A=-2: -min(-2.2, -2.2)   =  2.2  (inside the range)
    #   masked token: 0
    loss, metrics = ppo_clip(NEW, OLD, ADV, MASK)
    torch.testing.assert_close(loss, t([[-1.0, -1.2, 0.8, 2.2, 0.0]]))
    assert metrics["loss/clipfrac"] == pytest.approx(0.5)
    assert metrics["loss/ratio_mean"] == pytest.approx((1 + 1.5 + 0.5 + 1.1) / 4)
    assert metrics["loss/ratio_max"] == pytest.approx(1.5)
    # approx_kl = mean of (r - 1) - log r = [0, 0.5 - ln 1.5, -0.5 + ln 2, 0.1 - ln 1.1] / 4
    #           = (0.0945348919 + 0.1931471806 + 0.0046898202) / 4 = 0.0730929732
    kl = (0.5 - math.log(1.5) + (-0.5 + math.log(2)) + 0.1 - math.log(1.1)) / 4
    assert metrics["loss/approx_kl"] == pytest.approx(kl)
    assert kl == pytest.approx(0.0730929732, abs=1e-10)
    assert "loss/dual_clipfrac" not in metrics


def test_ppo_clip_higher() -> None:
    # clip_high = 0.28: r = 1.5, A = 1 -> -min(1.5, 1.28) = -1.28; r = 0.5, A = -1 still 0.8
    loss, _ = ppo_clip(NEW, OLD, ADV, MASK, clip_low=0.2, clip_high=0.28)
    torch.testing.assert_close(loss, t([[-1.0, -1.28, 0.8, 2.2, 0.0]]))


def test_ppo_dual_clip() -> None:
    # r = 5, A = -1: standard loss -min(-5, -1.2) = 5; dual clip c = 3 caps it at -c A = 3.
    # r = 5, A = +1: -min(5, 1.2) = -1.2, dual clip does not apply to A > 0.
    # r = 1.1, A = -2: 2.2 < 6, unchanged.
    old = t([[0.0, 0.0, 0.0]])
    new = t([[math.log(5), math.log(5), math.log(1.1)]])
    adv = t([[-1.0, 1.0, -2.0]])
    loss, metrics = ppo_clip(new, old, adv, torch.ones(1, 3), clip_c=3.0)
    torch.testing.assert_close(loss, t([[3.0, -1.2, 2.2]]))
    assert metrics["loss/dual_clipfrac"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="clip_c"):
        ppo_clip(new, old, adv, torch.ones(1, 3), clip_c=1.0)


def test_ppo_clip_max_log_ratio_caps_the_ratio() -> None:
    loss, metrics = ppo_clip(t([[50.0]]), t([[0.0]]), t([[-1.0]]), torch.ones(1, 1))
    assert metrics["loss/ratio_max"] == pytest.approx(math.exp(20.0))
    assert torch.isfinite(loss).all()


@FAST
@given(
    adv=st.lists(st.floats(-3, 3), min_size=6, max_size=6),
    logp=st.lists(st.floats(-5, 0), min_size=6, max_size=6),
    mask=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_ratio_one_is_plain_policy_gradient(
    adv: list[float], logp: list[float], mask: list[bool]
) -> None:
    # logprobs == old_logprobs: loss = -A on sampled tokens and d loss / d logp = -A
    logprobs = torch.tensor(logp, dtype=F64).view(2, 3).requires_grad_()
    advantages = torch.tensor(adv, dtype=F64).view(2, 3)
    token_mask = torch.tensor(mask, dtype=F64).view(2, 3)
    loss, metrics = ppo_clip(logprobs, logprobs.detach(), advantages, token_mask)
    torch.testing.assert_close(loss, -advantages * token_mask)
    loss.sum().backward()
    assert logprobs.grad is not None
    torch.testing.assert_close(logprobs.grad, -advantages * token_mask)
    assert metrics["loss/clipfrac"] == 0.0
    assert metrics["loss/approx_kl"] == 0.0


@FAST
@given(
    junk=st.sampled_from([math.inf, -math.inf, math.nan, 1e6, -3.0]),
    seed=st.integers(0, 2**16),
    clip_c=st.sampled_from([None, 3.0]),
)
def test_ppo_masked_tokens_cannot_change_anything(
    junk: float, seed: int, clip_c: float | None
) -> None:
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(3, 4, generator=g, dtype=F64)).requires_grad_()
    old = -torch.rand(3, 4, generator=g, dtype=F64)
    adv = torch.randn(3, 4, generator=g, dtype=F64)
    mask = (torch.rand(3, 4, generator=g) < 0.6).to(F64)
    base, base_metrics = ppo_clip(logp, old, adv, mask, clip_c=clip_c)
    (grad_base,) = torch.autograd.grad(base.sum(), logp)
    off = ~mask.bool()
    garbled = [torch.where(off, torch.full_like(x, junk), x) for x in (logp, old, adv)]
    loss, metrics = ppo_clip(*garbled, mask, clip_c=clip_c)
    (grad,) = torch.autograd.grad(loss.sum(), logp)
    torch.testing.assert_close(loss, base)
    assert torch.all(loss[off] == 0)
    assert metrics == pytest.approx(base_metrics)
    torch.testing.assert_close(grad, grad_base)  # finite, 0 on masked tokens
    assert torch.all(grad[off] == 0)


@FAST
@given(seed=st.integers(0, 2**16))
def test_ppo_loss_is_pessimistic_bound(seed: int) -> None:
    # -min(rA, clip(r)A) >= -rA everywhere: the clipped objective lower-bounds the surrogate
    g = torch.Generator().manual_seed(seed)
    logp, old = -torch.rand(4, 5, generator=g, dtype=F64), -torch.rand(4, 5, generator=g, dtype=F64)
    adv = torch.randn(4, 5, generator=g, dtype=F64)
    loss, _ = ppo_clip(logp, old, adv, torch.ones(4, 5))
    assert torch.all(loss >= -(logp - old).exp() * adv - 1e-12)


# ----------------------------------------------------------------------------- value loss


def test_value_loss_reference_values() -> None:
    # V = [1, 2], R = [0, 2.5], V_old = [0.9, 1.0], clip 0.5; third token masked (garbage)
    #   t0: (1-0)² = 1; V_clip = 0.9 + clamp(0.1) = 1.0 -> 1; ½ max(1, 1) = 0.5 (not clipped)
    #   t1: (2-2.5)² = 0.25; V_clip = 1.0 + clamp(1.0, ±0.5) = 1.5 -> (1.5-2.5)² = 1
    #       ½ max(0.25, 1) = 0.5 (clipped)
    values, returns = t([[1.0, 2.0, math.nan]]), t([[0.0, 2.5, math.inf]])
    old, mask = t([[0.9, 1.0, 7.0]]), t([[1, 1, 0]])
    loss, metrics = value_loss(values, returns, mask, old_values=old, clip=0.5)
    torch.testing.assert_close(loss, t([[0.5, 0.5, 0.0]]))
    assert metrics == {"loss/vf_clipfrac": pytest.approx(0.5)}
    # unclipped: ½ (V - R)² = [0.5, 0.125, 0]
    loss, metrics = value_loss(values, returns, mask)
    torch.testing.assert_close(loss, t([[0.5, 0.125, 0.0]]))
    assert metrics == {}


def test_value_loss_clip_needs_old_values() -> None:
    with pytest.raises(ValueError, match="old_values"):
        value_loss(t([[1.0]]), t([[0.0]]), t([[1.0]]), clip=0.2)


@FAST
@given(seed=st.integers(0, 2**16), clip=st.sampled_from([0.1, 0.5, 10.0]))
def test_value_loss_clipped_is_at_least_unclipped(seed: int, clip: float) -> None:
    g = torch.Generator().manual_seed(seed)
    v, r, old = (torch.randn(3, 4, generator=g, dtype=F64) for _ in range(3))
    mask = torch.ones(3, 4, dtype=F64)
    plain, _ = value_loss(v, r, mask)
    clipped, _ = value_loss(v, r, mask, old_values=old, clip=clip)
    assert torch.all(clipped >= plain)
    # V = V_old: clipping is inactive
    same, metrics = value_loss(v, r, mask, old_values=v, clip=clip)
    torch.testing.assert_close(same, plain)
    assert metrics["loss/vf_clipfrac"] == 0.0
