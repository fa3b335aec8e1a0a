"""KV-cache storage for :class:`turnrl.rollout.hf.HFEngine`: growing layers and session caches.

Owns :class:`GrowingLayer` (a cache layer whose keys/values are views into pre-allocated
buffers with spare room, so a decoding step writes one column instead of concatenating),
:func:`spare_buffer`, :class:`_SessionCache` (one episode's keys/values kept between its turns)
and :func:`batched_past`, which left-pads the sessions' cached prefixes into one past for a
batched prefill. The running batch and its scheduling live in :mod:`turnrl.rollout.hf`.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


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
