"""Masked helpers: reference values and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.algos.functional import (
    discounted_cumsum,
    entropy_from_logits,
    last_index,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
    next_sampled_index,
    place_turn_rewards,
)

FAST = settings(max_examples=30, deadline=None)
F64 = torch.float64
NAN = float("nan")


def test_masked_reductions_reference_values() -> None:
    # picked values [1, 3, 5] (nan and 100 are masked out): sum 9, mean 3,
    # unbiased var ((-2)² + 0 + 2²) / 2 = 4, biased 8/3
    x = torch.tensor([[1.0, NAN, 3.0], [100.0, 5.0, NAN]], dtype=F64)
    m = torch.tensor([[1, 0, 1], [0, 1, 0]])
    assert float(masked_sum(x, m)) == 9.0
    assert float(masked_mean(x, m)) == 3.0
    torch.testing.assert_close(masked_mean(x, m, dim=1), torch.tensor([2.0, 5.0], dtype=F64))
    assert float(masked_var(x, m)) == pytest.approx(4.0)
    assert float(masked_var(x, m, unbiased=False)) == pytest.approx(8 / 3)
    # whiten: (x - 3) / sqrt(4 + 1e-8) on picked entries, 0 elsewhere
    expected = (
        torch.tensor([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64) * 2 / math.sqrt(4 + 1e-8)
    )
    torch.testing.assert_close(masked_whiten(x, m), expected)
    # empty masks: mean 0, var 0
    assert float(masked_mean(x, torch.zeros_like(m))) == 0.0
    assert float(masked_var(x, torch.zeros_like(m))) == 0.0


def test_entropy_reference_values() -> None:
    # uniform over 2: ln 2; a banned (-inf) logit contributes 0; p = [1/4, 3/4]:
    # H = ¼ ln 4 + ¾ ln(4/3) = 0.5623351446
    logits = torch.tensor(
        [[[0.0, 0.0], [0.0, -math.inf], [0.0, math.log(3.0)], [1000.0, 1000.0]]], dtype=F64
    )
    expected = torch.tensor([[math.log(2), 0.0, 0.5623351446188083, math.log(2)]], dtype=F64)
    torch.testing.assert_close(entropy_from_logits(logits), expected)


def test_entropy_gradient_is_finite_with_banned_tokens() -> None:
    logits = torch.tensor([[[0.3, -math.inf, 1.0]]], dtype=F64, requires_grad=True)
    entropy_from_logits(logits).sum().backward()
    assert logits.grad is not None
    assert torch.isfinite(logits.grad).all()


@FAST
@given(logits=st.lists(st.floats(-30, 30), min_size=5, max_size=5), shift=st.floats(-100, 100))
def test_entropy_bounds_and_shift_invariance(logits: list[float], shift: float) -> None:
    z = torch.tensor([[logits]], dtype=F64)
    h = entropy_from_logits(z)
    assert h.shape == (1, 1)
    assert -1e-9 <= float(h) <= math.log(5) + 1e-9
    torch.testing.assert_close(entropy_from_logits(z + shift), h)


def test_index_helpers() -> None:
    m = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0]])
    torch.testing.assert_close(next_sampled_index(m), torch.tensor([[1, 2, 4, 4, 6, 6], [6] * 6]))
    torch.testing.assert_close(last_index(m), torch.tensor([4, -1]))


def test_place_turn_rewards_reference() -> None:
    # turn 0 = positions 1-2, turn 1 = position 4 (position 5 is turn 1's observation),
    # turn 2 exists (reward 5) but has no sampled token -> credited to position 4;
    # turn 3 does not exist (turn_mask 0) -> its 100 is ignored
    m = torch.tensor([[0, 1, 1, 0, 1, 0]])
    ti = torch.tensor([[-1, 0, 0, 0, 1, 1]])
    r = place_turn_rewards(
        m, ti, torch.tensor([[1.0, 2.0, 5.0, 100.0]]), torch.tensor([[1, 1, 1, 0]])
    )
    torch.testing.assert_close(r, torch.tensor([[0.0, 0.0, 1.0, 0.0, 7.0, 0.0]]))


def test_discounted_cumsum_reference() -> None:
    # sampled positions 0, 2, 3 with x = 1, 2, 4 (position 1 is skipped, not a step):
    # γ = 0.5: y_3 = 4, y_2 = 2 + 2 = 4, y_0 = 1 + 2 = 3; γ = 1: [7, 0, 6, 4]
    x = torch.tensor([[1.0, 50.0, 2.0, 4.0]], dtype=F64)
    m = torch.tensor([[1, 0, 1, 1]])
    torch.testing.assert_close(
        discounted_cumsum(x, m, 0.5), torch.tensor([[3.0, 0, 4, 4]], dtype=F64)
    )
    torch.testing.assert_close(
        discounted_cumsum(x, m, 1.0), torch.tensor([[7.0, 0, 6, 4]], dtype=F64)
    )


@FAST
@given(
    mask=st.lists(st.booleans(), min_size=7, max_size=7),
    seed=st.integers(0, 2**16),
)
def test_discounted_cumsum_fast_path_matches_loop(mask: list[bool], seed: int) -> None:
    x = torch.randn(1, 7, generator=torch.Generator().manual_seed(seed), dtype=F64)
    m = torch.tensor([mask])
    almost_one = discounted_cumsum(x, m, 1.0 - 1e-12)  # takes the loop
    torch.testing.assert_close(discounted_cumsum(x, m, 1.0), almost_one)
