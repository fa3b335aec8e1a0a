"""Loss aggregations: reference values and micro-batch invariance."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.algos import AGGREGATIONS

FAST = settings(max_examples=30, deadline=None)
F64 = torch.float64
NAMES = ["seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm", "token_mean"]

# three rows; the last has no sampled token (and garbage in its loss)
LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, float("nan")]], dtype=F64)
MASK = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=F64)


def test_registered() -> None:
    assert AGGREGATIONS.names() == NAMES


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("token_mean", 7 / 3),  # (1 + 2 + 4) / 3 tokens
        ("seq_mean_token_mean", 2.75),  # (1.5 + 4) / 2 rows with tokens
        ("seq_mean_token_sum", 3.5),  # (3 + 4) / 2
        ("seq_mean_token_sum_norm", 0.875),  # (3/4 + 4/4) / 2 with norm_len = 4
    ],
)
def test_reference_values(name: str, expected: float) -> None:
    value = AGGREGATIONS[name](LOSS, MASK, norm_len=4)
    assert value.dim() == 0
    assert float(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("token_mean", 7 / 10),  # global: 10 tokens in the whole batch
        ("seq_mean_token_mean", 5.5 / 5),  # global: 5 trajectories
        ("seq_mean_token_sum", 7 / 5),
        ("seq_mean_token_sum_norm", 1.75 / 5),
    ],
)
def test_global_normalisers_replace_own_counts(name: str, expected: float) -> None:
    value = AGGREGATIONS[name](LOSS, MASK, total_tokens=10, total_seqs=5, norm_len=4)
    assert float(value) == pytest.approx(expected)


def test_sum_norm_needs_norm_len() -> None:
    with pytest.raises(ValueError, match="norm_len"):
        AGGREGATIONS["seq_mean_token_sum_norm"](LOSS, MASK)


@pytest.mark.parametrize("name", NAMES)
def test_empty_mask_gives_zero_and_gradients_flow(name: str) -> None:
    per_token = LOSS.clone().nan_to_num(0.0).requires_grad_()
    assert float(AGGREGATIONS[name](per_token.detach(), torch.zeros_like(MASK), norm_len=4)) == 0.0
    AGGREGATIONS[name](per_token, MASK, norm_len=4).backward()
    assert per_token.grad is not None
    assert torch.all(per_token.grad[MASK == 0] == 0)
    assert torch.all(per_token.grad[MASK == 1] > 0)


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(
    mask=st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 6), max_size=3),
    seed=st.integers(0, 2**16),
)
def test_microbatch_split_does_not_change_the_loss(
    name: str, mask: list[list[bool]], cuts: list[int], seed: int
) -> None:
    token_mask = torch.tensor(mask, dtype=F64)
    B = token_mask.shape[0]
    per_token = torch.randn(B, 5, generator=torch.Generator().manual_seed(seed), dtype=F64)
    per_token[token_mask == 0] = float("nan")  # masked entries are never read
    totals = {
        "total_tokens": float(token_mask.sum()),
        "total_seqs": float((token_mask.sum(1) > 0).sum()),
        "norm_len": 5.0,
    }
    fn = AGGREGATIONS[name]
    full = fn(per_token, token_mask, norm_len=5.0)
    bounds = [0, *sorted(min(c, B) for c in cuts), B]
    micro = sum(
        fn(per_token[lo:hi], token_mask[lo:hi], **totals) for lo, hi in itertools.pairwise(bounds)
    )
    assert float(micro) == pytest.approx(float(full), abs=1e-12)
    torch.testing.assert_close(fn(per_token, token_mask, **totals), full)
