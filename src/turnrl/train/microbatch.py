"""Micro-batching: which rows share a forward pass, and how that pass is computed.

Every forward pass of the learner and of SFT is planned here:

- **padded**: rows sorted by length and greedily cut into passes of at most
  ``micro_batch_size`` rows and, with a token budget, ``rows × longest row`` tokens
  (:func:`micro_batches`);
- **shared prefix**: the same, with rows ordered by prompt so that a group's rows meet in
  one pass, whose common prompt is then encoded once (:mod:`turnrl.train.prefix`);
- **packed**: rows packed end to end into rows as wide as the longest trajectory of the
  mini-batch (:func:`packed_passes`, :mod:`turnrl.train.packing`);
- **bucketed**: SFT's shuffled batches of similar-length rows (:func:`bucketed_batches`).

:func:`forward` runs one planned pass in the chosen layout; all return log-probs (B, T) at
the same positions, so the loss does not depend on the layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from turnrl.models.policy import logprobs_from_logits
from turnrl.train.packing import first_fit_decreasing, packed_forward
from turnrl.train.prefix import prompt_sorted, shared_prefix_forward
from turnrl.types import TokenBatch, TrainBatch

Rows = TokenBatch | TrainBatch


@dataclass(frozen=True)
class PassPlan:
    """How forward passes are cut and computed (``train.micro_batch_size``,
    ``train.micro_batch_tokens``, ``train.packing``, ``train.share_prefix``)."""

    max_rows: int = 16
    max_tokens: int | None = None
    pack: bool = False
    share_prefix: bool = False
    temperature: float = 1.0  # log-probs are taken at the sampling temperature

    def passes(self, batch: Rows, rows: Tensor, *, packed: bool = True) -> list[Tensor]:
        """The forward passes over ``rows``. The critic's passes (``packed=False``) stay
        padded and length-sorted."""
        if self.pack and packed:
            return packed_passes(batch, rows, max_rows=self.max_rows, max_tokens=self.max_tokens)
        return micro_batches(batch, rows, max_rows=self.max_rows, max_tokens=self.max_tokens,
                             by_prompt=self.share_prefix and packed)


def forward(model: nn.Module, micro: Rows, width: int, plan: PassPlan, *,
            with_entropy: bool = False, with_hidden: bool = False
            ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Log-probs (B, T), optional entropies (B, T) and last hidden states (B, T, H) of
    ``model`` over a micro-batch: packed into rows ``width`` tokens wide (the longest
    trajectory of the mini-batch), with shared prompts encoded once, or right-padded."""
    if plan.pack:
        return packed_forward(model, micro.input_ids, micro.attention_mask,
                              temperature=plan.temperature, capacity=width,
                              with_entropy=with_entropy, with_hidden=with_hidden)
    if plan.share_prefix:
        shared = shared_prefix_forward(model, micro.input_ids, micro.attention_mask,
                                       micro.loss_mask, temperature=plan.temperature,
                                       with_entropy=with_entropy, with_hidden=with_hidden)
        if shared is not None:
            return shared
    out = model(input_ids=micro.input_ids, attention_mask=micro.attention_mask,
                output_hidden_states=with_hidden)
    logprobs, entropy = logprobs_from_logits(out.logits, micro.input_ids,
                                             temperature=plan.temperature,
                                             with_entropy=with_entropy)
    return logprobs, entropy, out.hidden_states[-1] if with_hidden else None


def micro_batches(batch: Rows, rows: Tensor, *, max_rows: int,
                  max_tokens: int | None = None, by_prompt: bool = False) -> list[Tensor]:
    """Cut ``rows`` into forward passes: sorted by length (``by_prompt``: by prompt, then
    length, so a group's rows share a pass; see :mod:`turnrl.train.prefix`), then greedily
    filled while a pass has at most ``max_rows`` rows and, with ``max_tokens``, at most that
    many padded tokens (rows × its longest row). A row longer than ``max_tokens`` gets a pass
    of its own.

    Short rows then share big passes and long rows small ones, so memory per pass is bounded
    and little of it is padding. Every row lands in exactly one pass.
    """
    ordered = (prompt_sorted(batch.input_ids, batch.loss_mask, batch.attention_mask, rows)
               if by_prompt else length_sorted(batch, rows))
    if max_tokens is None:
        return list(ordered.split(max_rows))
    lengths = batch.attention_mask[ordered].sum(-1).long().tolist()
    passes: list[Tensor] = []
    start, longest_row = 0, 0
    for end in range(1, len(lengths) + 1):
        count = end - start  # rows [start, end)
        longest_row = max(longest_row, lengths[end - 1])
        if (count > max_rows or count * longest_row > max_tokens) and count > 1:
            passes.append(ordered[start:end - 1])
            start, longest_row = end - 1, lengths[end - 1]
    passes.append(ordered[start:])
    return passes


def packed_passes(batch: Rows, rows: Tensor, *, max_rows: int,
                  max_tokens: int | None = None) -> list[Tensor]:
    """Cut ``rows`` into forward passes for packing: pack them (first-fit decreasing) into
    packed rows as wide as the longest of them, then give each pass up to ``max_rows`` packed
    rows and, with ``max_tokens``, at most that many tokens (packed rows × width; at least
    one packed row). Every row lands in exactly one pass."""
    lengths = batch.attention_mask[rows].sum(-1).long().tolist()
    width = max(lengths)
    bins = first_fit_decreasing(lengths, width)
    per_pass = max_rows if max_tokens is None else max(1, min(max_rows, max_tokens // width))
    return [rows[torch.tensor([i for b in bins[k:k + per_pass] for i in b])]
            for k in range(0, len(bins), per_pass)]


def length_sorted(batch: Rows, rows: Tensor) -> Tensor:
    """``rows`` ordered by sequence length, so micro-batches cut from them carry little padding."""
    lengths = batch.attention_mask[rows].sum(-1)
    return rows[torch.argsort(lengths, stable=True)]


def bucketed_batches(batch: Rows, batch_size: int, generator: torch.Generator,
                     bucket: int = 8) -> list[Tensor]:
    """Shuffled batches of similar-length rows: shuffle, sort each run of ``bucket`` batches
    by length, cut it into batches, then shuffle the batch order."""
    order = torch.randperm(batch.size, generator=generator)
    batches: list[Tensor] = []
    for chunk in order.split(batch_size * bucket):
        batches.extend(length_sorted(batch, chunk).split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def longest(batch: Rows, rows: Tensor) -> int:
    """The longest sequence (real tokens) among ``rows``."""
    return int(batch.attention_mask[rows].sum(-1).max())
