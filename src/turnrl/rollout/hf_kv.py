"""KV-cache storage for :class:`turnrl.rollout.hf.HFEngine`: growing layers, session caches
and the surgery on the running batch's buffers.

Owns :class:`GrowingLayer` (a cache layer whose keys/values are views into pre-allocated
buffers with spare room, so a decoding step writes one column instead of concatenating),
:func:`spare_buffer`, :class:`_SessionCache` (one episode's keys/values kept between its turns),
:func:`prefill_inputs` and :func:`batched_past` (a batched prefill's inputs, the sessions'
cached prefixes left-padded into one past), :func:`live_rows`, :func:`stack_rows` and
:func:`fill_rows` (the batch without its finished rows; batches stacked into new buffers;
new rows written over finished ones) and :func:`column_runs` / :func:`take_columns` (one
row's columns copied out as a session). The running batch and its
scheduling live in :mod:`turnrl.rollout.hf`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer


@dataclass
class _SessionCache:
    """The KV cache of one episode's ledger, kept between its turns (one row, no padding)."""

    token_ids: list[int]
    keys: list[Tensor]  # per layer (1, kv_heads, len(token_ids), head_dim)
    values: list[Tensor]


class GrowingLayer(DynamicLayer):
    """A KV-cache layer whose keys/values (B, kv_heads, L, head_dim) are views into buffers
    with spare room: appending k tokens writes k columns, and a full buffer doubles (amortised
    O(1) per token; ``DynamicLayer`` copies the whole cache on every append)."""

    def __init__(self, keys: Tensor | None = None, values: Tensor | None = None, *,
                 length: int | None = None) -> None:
        """Adopt ``keys``/``values`` as buffers whose first ``length`` columns (default: all)
        are the cache."""
        super().__init__()
        if keys is not None and values is not None:
            self._adopt(keys, values, keys.shape[-2] if length is None else length)

    def _adopt(self, keys: Tensor, values: Tensor, length: int) -> None:
        self._keys, self._values = keys, values
        self.keys, self.values = keys[:, :, :length], values[:, :, :length]
        self.device, self.is_initialized = keys.device, True

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs
               ) -> tuple[Tensor, Tensor]:
        new = key_states.shape[-2]
        if not self.is_initialized:
            self._adopt(spare_buffer(key_states, new), spare_buffer(value_states, new), new)
            return self.keys, self.values
        length = self.keys.shape[-2]
        if length + new > self._keys.shape[-2]:
            self._adopt(spare_buffer(self.keys, max(length, new)),
                        spare_buffer(self.values, max(length, new)), length)
        self._keys[:, :, length:length + new] = key_states
        self._values[:, :, length:length + new] = value_states
        self._adopt(self._keys, self._values, length + new)
        return self.keys, self.values


def spare_buffer(states: Tensor, spare: int) -> Tensor:
    """A buffer (B, H, L + spare, D) whose first L columns are ``states``; the spare columns
    are uninitialised (they are written before any view covers them)."""
    size, heads, length, dim = states.shape
    buffer = states.new_empty((size, heads, length + spare, dim))
    buffer[:, :, :length] = states
    return buffer


def column_runs(mask_row: Tensor) -> list[tuple[int, int]]:
    """The columns where ``mask_row`` (L,) is 1, as runs ``[start, end)``: a row of the
    running batch is its cached prefix, then its new and sampled tokens, with padding between,
    so a few runs."""
    columns = mask_row.nonzero()[:, 0].tolist()
    runs, start = [], columns[0]
    for a, b in itertools.pairwise(columns):
        if b != a + 1:
            runs.append((start, a + 1))
            start = b
    return [*runs, (start, columns[-1] + 1)]


def take_columns(states: Tensor, row: int, runs: list[tuple[int, int]]) -> Tensor:
    """Row ``row`` of ``states`` (B, H, L, D), its columns in ``runs`` only: (1, H, n, D), a
    copy. Slices, not an index tensor: indexing a few thousand columns costs ~10x more."""
    parts = [states[row:row + 1, :, a:b] for a, b in runs]
    return parts[0].clone() if len(parts) == 1 else torch.cat(parts, 2)


def batched_past(cached: list[_SessionCache | None], prefix: list[int],
                 past_len: int) -> DynamicCache:
    """A DynamicCache holding each row's cached keys/values, left-padded to ``past_len``."""
    present = [c for c in cached if c is not None]
    if not present:
        return DynamicCache()
    layers = []
    for layer in range(len(present[0].keys)):
        like = present[0].keys[layer]
        shape = (len(cached), like.shape[1], past_len, like.shape[3])
        keys, values = like.new_zeros(shape), like.new_zeros(shape)
        for row, c in enumerate(cached):
            if c is not None:
                keys[row, :, past_len - prefix[row]:] = c.keys[layer][0]
                values[row, :, past_len - prefix[row]:] = c.values[layer][0]
        layers.append((keys, values))
    return DynamicCache(layers)


def prefill_inputs(suffixes: list[list[int]], cached: list[_SessionCache | None],
                   prefix: list[int], pad_token_id: int, device: torch.device
                   ) -> tuple[Tensor, Tensor, Tensor, DynamicCache]:
    """The inputs of a batched prefill of B rows: each row's ``suffixes`` (new tokens) after
    its cached prefix of ``prefix`` tokens. Each row is laid out as ``[left-padded cached
    prefix | left-padded new tokens]``, P = max(prefix) and W = max(len(suffix)) columns.

    Returns:
        input_ids (B, W), attention mask (B, P + W), position ids (B, W) counting each row's
        own tokens only, and the cached prefixes as one past (:func:`batched_past`).
    """
    past_len, width = max(prefix), max(len(s) for s in suffixes)
    input_ids = torch.full((len(suffixes), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(suffixes), past_len + width), dtype=torch.long)
    for row, suffix in enumerate(suffixes):
        input_ids[row, width - len(suffix):] = torch.tensor(suffix)
        mask[row, past_len - prefix[row]:past_len] = 1
        mask[row, past_len + width - len(suffix):] = 1
    input_ids, mask = input_ids.to(device), mask.to(device)
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)[:, past_len:]
    return input_ids, mask, position_ids, batched_past(cached, prefix, past_len)


def live_rows(cache: Cache, mask: Tensor, alive: list[int]) -> tuple[Cache, Tensor]:
    """Rows ``alive`` of a batch's keys/values (B, H, L, D) and mask (B, L) (views when they
    are all of its rows), without the leading columns that none of them attends to."""
    index = None
    if len(alive) < mask.shape[0]:
        index = torch.tensor(alive, device=mask.device)
        mask = mask.index_select(0, index)
    start = int(mask.any(0).nonzero()[0])

    def take(t: Tensor) -> Tensor:
        return (t if index is None else t.index_select(0, index))[:, :, start:]

    layers = [GrowingLayer(take(layer.keys), take(layer.values)) for layer in cache.layers]
    return Cache(layers=layers), mask[:, start:]  # type: ignore[arg-type]


def stack_rows(parts: list[tuple[Cache, Tensor]], spare: int) -> tuple[Cache, Tensor]:
    """The rows of ``parts`` (each keys/values (n, H, width, D) and mask (n, width)) one after
    another, right-aligned in new buffers of one common length with ``spare`` free columns
    (left padding: mask 0, keys/values 0, so masked but finite)."""
    length = max(m.shape[1] for _, m in parts)
    size = sum(m.shape[0] for _, m in parts)
    mask = parts[-1][1].new_zeros((size, length))
    layers = []
    for layer in range(len(parts[-1][0].layers)):
        like = parts[-1][0].layers[layer].keys
        shape = (size, like.shape[1], length + spare, like.shape[3])
        keys, values = like.new_empty(shape), like.new_empty(shape)
        row = 0
        for part_cache, part_mask in parts:
            n, width = part_mask.shape
            keys[row:row + n, :, :length - width] = 0
            values[row:row + n, :, :length - width] = 0
            keys[row:row + n, :, length - width:length] = part_cache.layers[layer].keys
            values[row:row + n, :, length - width:length] = part_cache.layers[layer].values
            row += n
        layers.append(GrowingLayer(keys, values, length=length))
    row = 0
    for _, part_mask in parts:
        n, width = part_mask.shape
        mask[row:row + n, length - width:] = part_mask
        row += n
    return Cache(layers=layers), mask  # type: ignore[arg-type]


def fill_rows(cache: Cache, mask: Tensor, rows: list[int], new: Cache, new_mask: Tensor) -> None:
    """Write the rows of ``new`` (keys/values (n, H, w, D), mask (n, w)) over rows ``rows`` of
    a batch (keys/values (B, H, L, D), mask (B, L), w <= L) in place, right-aligned; the
    rest of those rows is masked out (its stale keys/values stay: finite, never attended)."""
    index = torch.tensor(rows, device=mask.device)
    width, length = new_mask.shape[1], mask.shape[1]
    for layer, part in zip(cache.layers, new.layers, strict=True):
        layer.keys[:, :, length - width:].index_copy_(0, index, part.keys)  # type: ignore[union-attr]
        layer.values[:, :, length - width:].index_copy_(0, index, part.values)  # type: ignore[union-attr]
    mask.index_fill_(0, index, 0)
    mask[:, length - width:].index_copy_(0, index, new_mask)
