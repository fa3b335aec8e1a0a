"""Shared-prefix forward passes: same log-probs, entropies, hidden states and gradients as one
padded pass; prompts found from the loss mask; a group's rows kept in one pass."""

from __future__ import annotations

import torch

from turnrl.models.policy import logprobs_from_logits
from turnrl.train.microbatch import micro_batches
from turnrl.train.prefix import prompt_ids, prompt_lengths, prompt_sorted, shared_prefix_forward
from turnrl.types import TrainBatch


def grouped(prompts: list[list[int]], rests: list[tuple[int, list[int]]]
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (ids, attention mask, loss mask): row i = prompts[p] + rest (sampled)."""
    rows = [(prompts[p], rest) for p, rest in rests]
    width = max(len(p) + len(r) for p, r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width))
    loss = torch.zeros((len(rows), width))
    for i, (prompt, rest) in enumerate(rows):
        ids[i, :len(prompt) + len(rest)] = torch.tensor(prompt + rest)
        mask[i, :len(prompt) + len(rest)] = 1
        loss[i, len(prompt):len(prompt) + len(rest)] = 1
    return ids, mask, loss


PROMPTS = [[3, 14, 15, 9, 26, 5], [8, 9, 7, 9, 3, 2, 38, 4, 6], [27, 18]]
RESTS = [(0, [11, 12, 13, 14]), (1, [21]), (0, [15, 16]), (2, [40, 41, 42, 43, 44]),
         (1, [22, 23, 24]), (0, [17, 18, 19, 20, 21, 22])]


def test_prompts_end_at_the_first_sampled_token() -> None:
    ids, mask, loss = grouped(PROMPTS, RESTS)
    lengths = prompt_lengths(loss, mask)
    assert lengths.tolist() == [6, 9, 6, 2, 9, 6]
    owner, n = prompt_ids(ids, lengths)
    assert owner == [0, 1, 0, 2, 1, 0] and n == 3
    # a row without a sampled token keeps one token for the remainder
    assert prompt_lengths(torch.zeros(1, 5), torch.ones(1, 5)).tolist() == [4]
    order = prompt_sorted(ids, loss, mask, torch.arange(6))
    assert order.tolist() == [2, 0, 5, 1, 4, 3]  # by prompt, then by length


def test_shared_prefix_forward_equals_the_padded_forward(load_sft) -> None:
    model = load_sft().eval()
    ids, mask, loss = grouped(PROMPTS, RESTS)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        want_lp, want_ent = logprobs_from_logits(out.logits, ids, with_entropy=True)
        shared = shared_prefix_forward(model, ids, mask, loss, with_entropy=True,
                                       with_hidden=True)
    assert shared is not None
    got_lp, got_ent, got_hidden = shared
    assert got_ent is not None and got_hidden is not None
    real = mask.bool()
    torch.testing.assert_close(got_lp[real], want_lp[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_ent[real], want_ent[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_hidden[real], out.hidden_states[-1][real], atol=1e-5,
                               rtol=1e-5)
    assert got_lp[~real].abs().max() == 0
    # the check has teeth: a remainder read after the wrong prompt changes its log-probs
    wrong = ids.clone()
    wrong[0, :6] = torch.tensor(PROMPTS[1][:6])
    with torch.no_grad():
        other = logprobs_from_logits(model(input_ids=wrong, attention_mask=mask).logits, wrong)[0]
    assert (other[0, 6:10] - want_lp[0, 6:10]).abs().max() > 1e-3


def test_shared_prefix_gradient_equals_the_padded_gradient(load_sft) -> None:
    ids, mask, loss = grouped(PROMPTS, RESTS)
    weights = torch.linspace(-1.0, 1.0, ids.shape[1])[None, :] * loss

    def gradient(shared: bool) -> dict[str, torch.Tensor]:
        model = load_sft().train()
        if shared:
            result = shared_prefix_forward(model, ids, mask, loss, temperature=0.7)
            assert result is not None
            logprobs = result[0]
        else:
            logits = model(input_ids=ids, attention_mask=mask).logits
            logprobs = logprobs_from_logits(logits, ids, temperature=0.7)[0]
        (logprobs * weights).sum().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    want, got = gradient(False), gradient(True)
    assert want.keys() == got.keys() and len(want) > 10
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_shared_prefix_forward_declines_when_nothing_is_shared(load_sft) -> None:
    model = load_sft().eval()
    ids, mask, loss = grouped(PROMPTS, [(0, [11, 12]), (1, [21]), (2, [40])])
    assert shared_prefix_forward(model, ids, mask, loss) is None  # three distinct prompts
    ids, mask, loss = grouped([[5]], [(0, []), (0, [7])])
    assert shared_prefix_forward(model, ids, mask, loss) is None  # a one-token row


def test_micro_batches_by_prompt_keep_a_group_together() -> None:
    ids, mask, loss = grouped(PROMPTS, RESTS)
    zeros = torch.zeros_like(mask)
    batch = TrainBatch(input_ids=ids, attention_mask=mask, loss_mask=loss, old_logprobs=zeros,
                       advantages=zeros, returns=zeros)
    passes = micro_batches(batch, torch.arange(6), max_rows=3, by_prompt=True)
    assert [p.tolist() for p in passes] == [[2, 0, 5], [1, 4, 3]]
    # the token budget uses the longest row of each pass, whatever the order
    lengths = mask.sum(-1).long()
    passes = micro_batches(batch, torch.arange(6), max_rows=6, max_tokens=24, by_prompt=True)
    assert sorted(torch.cat(passes).tolist()) == list(range(6))
    for chunk in passes:
        assert len(chunk) == 1 or len(chunk) * int(lengths[chunk].max()) <= 24
