"""KL estimators k1, k2, k3: reference values and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.algos import KL_ESTIMATORS

FAST = settings(max_examples=30, deadline=None)
F64 = torch.float64
LN2 = math.log(2)


def test_registered() -> None:
    assert KL_ESTIMATORS.names() == ["k1", "k2", "k3"]


@pytest.mark.parametrize(
    ("name", "p_over_q_half", "q_over_p_half"),
    [
        # p = 0.5, q = 0.25: log p - log q = ln 2
        #   k1 = ln 2; k2 = ½ ln²2; k3 = q/p - ln(q/p) - 1 = 0.5 + ln 2 - 1
        # p = 0.25, q = 0.5: log p - log q = -ln 2
        #   k1 = -ln 2; k2 = ½ ln²2; k3 = 2 - ln 2 - 1
        ("k1", LN2, -LN2),
        ("k2", 0.5 * LN2**2, 0.5 * LN2**2),
        ("k3", 0.5 + LN2 - 1, 2 - LN2 - 1),
    ],
)
def test_reference_values(name: str, p_over_q_half: float, q_over_p_half: float) -> None:
    logp = torch.tensor([[math.log(0.5), math.log(0.25)]], dtype=F64)
    logq = torch.tensor([[math.log(0.25), math.log(0.5)]], dtype=F64)
    out = KL_ESTIMATORS[name](logp, logq)
    torch.testing.assert_close(out, torch.tensor([[p_over_q_half, q_over_p_half]], dtype=F64))


def test_k3_clamps_like_verl() -> None:
    # log q - log p = -30 -> clamped to -20: e^-20 + 20 - 1 = 19.000000002 -> output clamp 10
    # log q - log p = +30 -> clamped to +20: e^20 - 21 -> output clamp 10
    # log q - log p = -12: e^-12 + 12 - 1 = 11.000006 -> 10
    logp = torch.tensor([[30.0, -30.0, 12.0, 0.0]], dtype=F64)
    out = KL_ESTIMATORS["k3"](logp, torch.zeros_like(logp))
    torch.testing.assert_close(out, torch.tensor([[10.0, 10.0, 10.0, 0.0]], dtype=F64))


@FAST
@given(
    logp=st.lists(st.floats(-8, 0), min_size=4, max_size=4),
    logq=st.lists(st.floats(-8, 0), min_size=4, max_size=4),
)
def test_zero_at_equality_and_nonnegative(logp: list[float], logq: list[float]) -> None:
    p = torch.tensor([logp], dtype=F64)
    q = torch.tensor([logq], dtype=F64)
    for name in KL_ESTIMATORS.names():
        fn = KL_ESTIMATORS[name]
        assert torch.all(fn(p, p) == 0)
        assert fn(p, q).shape == p.shape
    assert torch.all(KL_ESTIMATORS["k2"](p, q) >= 0)
    assert torch.all(KL_ESTIMATORS["k3"](p, q) >= 0)


def test_k1_and_k3_are_unbiased_for_exact_kl() -> None:
    # E_{x~p}[k] = KL(p‖q) exactly, computed by weighting each outcome with p(x)
    p = torch.tensor([0.5, 0.3, 0.2], dtype=F64)
    q = torch.tensor([0.2, 0.2, 0.6], dtype=F64)
    exact = float((p * (p / q).log()).sum())
    for name in ("k1", "k3"):
        per_outcome = KL_ESTIMATORS[name](p.log()[None], q.log()[None])[0]
        assert float((p * per_outcome).sum()) == pytest.approx(exact)
