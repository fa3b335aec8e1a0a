"""Sequence packing: layout of packed rows and equality with the right-padded forward pass."""

from __future__ import annotations

import pytest
import torch

from turnrl.models.policy import ValueModel, logprobs_from_logits
from turnrl.train.microbatch import packed_passes
from turnrl.train.packing import first_fit_decreasing, pack, packed_forward


def padded(lengths: list[int], vocab: int = 90, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random right-padded ids (B, T) with the given lengths, and their attention mask."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    mask = torch.zeros((len(lengths), width))
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(3, vocab, (n,), generator=generator)
        mask[row, :n] = 1
    return ids, mask


def test_first_fit_decreasing_layout_and_round_trip() -> None:
    ids, mask = padded([5, 2, 7, 3, 1])
    packing = pack(ids, mask, fill_token_id=0)
    # capacity = longest (7): rows {7}, {5, 2}, {3, 1} by first fit in decreasing order
    assert packing.input_ids.shape == (3, 7)
    assert packing.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6],
                                             [0, 1, 2, 3, 4, 0, 1],
                                             [0, 1, 2, 0, 0, 1, 2]]  # filler restarts at 0
    assert packing.input_ids[1, :5].tolist() == ids[0, :5].tolist()
    assert packing.input_ids[2, 3].item() == ids[4, 0].item()
    assert packing.rows.numel() == int(mask.sum())  # every real token once
    assert torch.equal(packing.unpack(packing.input_ids), ids * mask.long())
    # a larger capacity puts everything in one row
    wide = pack(ids, mask, capacity=18)
    assert wide.input_ids.shape == (1, 18)
    assert torch.equal(wide.unpack(wide.input_ids), ids * mask.long())


@pytest.mark.parametrize("capacity", [None, 64])
def test_packed_forward_equals_the_padded_forward(load_sft, capacity) -> None:
    """transformers reads the position-id restarts as sequence boundaries: no attention leaks
    between packed sequences, so log-probs, entropies and hidden states match the padded pass."""
    model = load_sft().eval()
    ids, mask = padded([17, 4, 30, 9, 12, 1], vocab=100)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        want_lp, want_ent = logprobs_from_logits(out.logits, ids, with_entropy=True)
        got_lp, got_ent, got_hidden = packed_forward(model, ids, mask, with_entropy=True,
                                                     with_hidden=True, capacity=capacity)
    real = mask.bool()
    assert got_ent is not None and got_hidden is not None
    torch.testing.assert_close(got_lp[real], want_lp[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_ent[real], want_ent[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_hidden[real], out.hidden_states[-1][real], atol=1e-5,
                               rtol=1e-5)
    assert got_lp[:, 0].abs().max() == 0 and got_lp[~real].abs().max() == 0
    # the check has teeth: one causal sequence per row (no restarts) leaks attention across
    # packed sequences and changes their log-probs
    packing = pack(ids, mask, capacity=capacity)
    with torch.no_grad():
        leaky = model(input_ids=packing.input_ids, use_cache=False).logits
    leaky_lp = packing.unpack(logprobs_from_logits(leaky, packing.input_ids)[0])
    assert (leaky_lp[real] - want_lp[real]).abs().max() > 1e-3


def test_packed_forward_with_temperature_and_gradients(load_sft) -> None:
    ids, mask = padded([6, 11, 3], vocab=100, seed=1)
    model = load_sft()
    lp_packed, _, _ = packed_forward(model, ids, mask, temperature=0.7, capacity=32)
    (lp_packed * mask).sum().backward()
    packed_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits = model(input_ids=ids, attention_mask=mask).logits
    lp, _ = logprobs_from_logits(logits, ids, temperature=0.7)
    (lp * mask).sum().backward()
    for a, p in zip(packed_grads, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, atol=1e-5, rtol=1e-4)


def test_shared_value_head_reads_unpacked_hidden_states(load_sft) -> None:
    model = load_sft().eval()
    critic = ValueModel.from_policy(model, shared=True)
    ids, mask = padded([8, 3, 13], vocab=100, seed=2)
    with torch.no_grad():
        want = critic(ids, mask)
        _, _, hidden = packed_forward(model, ids, mask, with_hidden=True, capacity=24)
        got = critic.values_from_hidden(hidden)
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)


def test_first_fit_decreasing_fills_bins_within_capacity() -> None:
    lengths = [5, 2, 7, 3, 1, 9]
    bins = first_fit_decreasing(lengths, 9)
    assert bins == [[5], [2, 1], [0, 3, 4]]  # 9 | 7+2 | 5+3+1
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert first_fit_decreasing([12, 3], 10) == [[0], [1]]  # too long: a bin of its own


def test_packed_passes_bound_rows_and_tokens() -> None:
    from turnrl.train.layout import layout
    from turnrl.types import Trajectory

    lengths = [5, 2, 7, 3, 1, 9, 4, 4]
    trajectories = [Trajectory(env_id="t", seed=i, group_id=0, messages=[],
                               token_ids=[3] * n, loss_mask=[1] * n, logprobs=[0.0] * n,
                               turn_index=[0] * n, turn_rewards=[0.0], terminated=True,
                               truncated=False, info={}) for i, n in enumerate(lengths)]
    batch = layout(trajectories, pad_token_id=0)
    rows = torch.arange(len(lengths))
    # width 9: bins {9}, {7, 2}, {5, 4}, {4, 3, 1} -> two packed rows per pass
    passes = packed_passes(batch, rows, max_rows=2)
    assert [sorted(p.tolist()) for p in passes] == [[1, 2, 5], [0, 3, 4, 6, 7]]
    # a token budget of 20 allows two rows of width 9; of 10 only one
    assert len(packed_passes(batch, rows, max_rows=8, max_tokens=20)) == 2
    assert len(packed_passes(batch, rows, max_rows=8, max_tokens=10)) == 4
    assert sorted(torch.cat(passes).tolist()) == rows.tolist()
