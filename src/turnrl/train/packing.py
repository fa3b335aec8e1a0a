"""Sequence packing: several trajectories share one row of a forward pass.

A right-padded batch (B, T) spends compute on padding when lengths vary. Packing places the
sequences end to end in R ≤ B rows of a common width P (first-fit decreasing into rows of
``capacity`` tokens), restarting ``position_ids`` at 0 for each sequence. Called with
``attention_mask=None`` and no cache, transformers reads the restarts as sequence boundaries
and masks attention block-diagonally (causal within each sequence, nothing across), so every
token's logits equal those of the padded layout.

The learner packs a whole mini-batch into rows as wide as its longest trajectory and cuts
the rows into forward passes (``turnrl.train.microbatch.packed_passes``), so a pass costs no
more memory than the widest padded pass while most of the padding is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from turnrl.models.policy import logprobs_from_logits


def first_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Bins of indices into ``lengths``, each summing to at most ``capacity`` (an item longer
    than that gets a bin of its own): items by decreasing length, each into the first bin
    with room."""
    bins: list[list[int]] = []
    used: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        slot = next((b for b, u in enumerate(used) if u + lengths[i] <= capacity), None)
        if slot is None:
            bins.append([i])
            used.append(lengths[i])
        else:
            bins[slot].append(i)
            used[slot] += lengths[i]
    return bins


@dataclass
class Packing:
    """Where each real token of a (B, T) batch sits in the packed (R, P) rows."""

    input_ids: Tensor  # (R, P) long; the tail of a row is filler (a sequence of its own)
    position_ids: Tensor  # (R, P) long; 0 at the first token of every sequence
    rows: Tensor  # (N,) batch row of each real token
    cols: Tensor  # (N,) its position in that row
    packed_rows: Tensor  # (N,) its packed row
    packed_cols: Tensor  # (N,) its packed position
    shape: tuple[int, int]  # (B, T)

    def unpack(self, packed: Tensor) -> Tensor:
        """Values (R, P, ...) of packed positions → (B, T, ...), zero at padding."""
        out = packed.new_zeros(self.shape + tuple(packed.shape[2:]))
        out[self.rows, self.cols] = packed[self.packed_rows, self.packed_cols]
        return out


def pack(input_ids: Tensor, attention_mask: Tensor, *, capacity: int | None = None,
         fill_token_id: int = 0) -> Packing:
    """Pack the right-padded rows of ``input_ids`` (B, T) into rows of at most ``capacity``
    tokens (default and minimum: the longest sequence), first-fit by decreasing length."""
    size, width = input_ids.shape
    lengths = attention_mask.sum(-1).long().tolist()
    bins = first_fit_decreasing(lengths, max(capacity or 0, max(lengths), 1))
    packed_width = max(sum(lengths[b] for b in members) for members in bins)
    ids = torch.full((len(bins), packed_width), fill_token_id, dtype=input_ids.dtype,
                     device=input_ids.device)
    positions = torch.zeros((len(bins), packed_width), dtype=torch.long, device=input_ids.device)
    rows, cols, packed_rows, packed_cols = [], [], [], []
    for r, members in enumerate(bins):
        offset = 0
        for b in members:
            n = lengths[b]
            ids[r, offset:offset + n] = input_ids[b, :n]
            positions[r, offset:offset + n] = torch.arange(n)
            rows.append(torch.full((n,), b))
            cols.append(torch.arange(n))
            packed_rows.append(torch.full((n,), r))
            packed_cols.append(torch.arange(offset, offset + n))
            offset += n
        positions[r, offset:] = torch.arange(packed_width - offset)  # filler: its own sequence
    device = input_ids.device
    return Packing(ids, positions, torch.cat(rows).to(device), torch.cat(cols).to(device),
                   torch.cat(packed_rows).to(device), torch.cat(packed_cols).to(device),
                   (size, width))


def packed_forward(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, *,
                   temperature: float = 1.0, with_entropy: bool = False,
                   with_hidden: bool = False, capacity: int | None = None
                   ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """One packed forward pass over a right-padded batch.

    Args:
        input_ids, attention_mask: (B, T), right-padded.
    Returns:
        log-probs (B, T) and, if asked, entropies (B, T) aligned as in
        :func:`~turnrl.models.policy.logprobs_from_logits` (0 at t = 0 and at padding), and
        the last hidden states (B, T, H).
    """
    packing = pack(input_ids, attention_mask, capacity=capacity)
    out = model(input_ids=packing.input_ids, position_ids=packing.position_ids,
                attention_mask=None, use_cache=False, output_hidden_states=with_hidden)
    logprobs, entropy = logprobs_from_logits(out.logits, packing.input_ids,
                                             temperature=temperature, with_entropy=with_entropy)
    starts = packing.position_ids == 0  # predicted from the previous sequence: not a log-prob
    logprobs = packing.unpack(logprobs.masked_fill(starts, 0.0))
    if entropy is not None:
        entropy = packing.unpack(entropy.masked_fill(starts, 0.0))
    hidden = packing.unpack(out.hidden_states[-1]) if with_hidden else None
    return logprobs, entropy, hidden
