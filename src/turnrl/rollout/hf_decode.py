"""One decoding step of a Llama-family model without the transformers forward's overhead.

A decoding step feeds each running row one token. Through ``model(...)`` that step also
pays for the attention mask's construction, the attention-interface dispatch and the output
records, which for a small model is much of the step: the built-in 4-layer model at batch
64 over 150 cached tokens took 3.4 ms through ``model(...)`` and 2.6 ms through this step
on 2 CPU cores. :class:`DecodeStep` runs the same step from the model's own modules (its
embedding, norms, projections, MLPs, rotary embedding and head, so LoRA layers and kernel
replacements still apply) and computes only the attention itself, for one query token per
row over the engine's cache::

    s = (q · Kᵀ) · scaling + bias    q (B, kv_heads, groups, head_dim), K (B, kv_heads, L, head_dim)
    o = softmax(s) · V               bias (B, 1, 1, L): 0 where the mask is 1, else -inf

which is the eager attention of transformers for a single query (grouped-query heads share
their key/value head instead of being repeated). Logits equal the transformers forward pass
to float rounding (about 1e-6 in fp32; ``tests/unit/test_hf_decode.py``).

The same pass also prefills the rows the engine admits while others decode
(:class:`Extension`): every module but attention runs once over all of the pass's tokens, so
a step that admits costs one pass where it cost a prefill pass and a decoding pass (64 rows
decoding over 300 cached tokens while 8 rows of 20 new tokens join: 8.4 ms against 5.3 + 4.1
ms, ``bench/admission.py`` for whole rollouts).

Only architectures whose attention is exactly "project, rotate, cache, attend, project"
are served (:func:`decode_step_for`); any other model decodes through ``model(...)``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from transformers.cache_utils import Cache

__all__ = ["DecodeStep", "Extension", "decode_step_for"]

# model types whose decoder layers are Llama's: pre-norm, attention as below, an MLP
SUPPORTED = {"llama", "qwen2"}


def decode_step_for(model: nn.Module) -> DecodeStep | None:
    """A :class:`DecodeStep` for ``model`` (a causal LM, or a peft model around one), or None
    when its architecture or settings are not the plain Llama attention."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if config is None or getattr(config, "model_type", None) not in SUPPORTED:
        return None
    if any(t != "full_attention" for t in getattr(config, "layer_types", None) or []):
        return None  # sliding-window layers
    if getattr(config, "pretraining_tp", 1) != 1:
        return None
    if getattr(config, "_attn_implementation", "sdpa") not in ("sdpa", "eager"):
        return None
    inner = getattr(base, "model", None)
    if inner is None or not hasattr(inner, "rotary_emb") or not hasattr(base, "lm_head"):
        return None
    for layer in inner.layers:
        attention = layer.self_attn
        if not all(hasattr(attention, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
            return None
        if hasattr(attention, "q_norm") or hasattr(attention, "k_norm"):
            return None
    return DecodeStep(base)


class Extension(NamedTuple):
    """Rows to prefill in the same pass as a decoding step (:meth:`DecodeStep.__call__`).

    Attributes:
        ids: (B2, W) the new tokens of each row, left-padded.
        cache: the rows' cached prefixes, one layer per decoder layer, keys/values
            (B2, kv_heads, P, head_dim) (P may be 0); the pass appends the W new columns.
        mask: (B2, P + W) 1 where a row attends (its prefix and its new tokens), else 0.
        positions: (B2, W) the position id of each new token.
    """

    ids: Tensor
    cache: Cache
    mask: Tensor
    positions: Tensor


class DecodeStep:
    """``logits = step(tokens, cache, mask, positions[, extension])``: one token per running
    row through ``model`` and, in the same pass, the new tokens of the rows being admitted.

    Every module but attention sees the pass's N = B + B2·W tokens as one flat batch, so
    admitting rows while others decode costs one pass (the per-module overhead is paid once)
    instead of a prefill pass and a decoding pass. Attention runs per part: a running row's
    token over its row of the engine's cache (as above), and an admitted row's W tokens over
    its cached prefix and themselves, causally, by scaled-dot-product attention with
    ``bias[b, i, j] = 0`` where ``mask[b, j] = 1`` and ``j <= P + i``, else -inf.

    Args (of a call):
        tokens: (B,) the token each running row feeds.
        cache: the engine's cache, one layer per decoder layer, keys/values
            (B, kv_heads, L, head_dim); the step appends this token's keys and values.
        mask: (B, L + 1) 1 where a row attends (its own tokens, this one included), 0 on its
            left padding.
        positions: (B, 1) each row's position id for this token.
        extension: rows to prefill in the same pass (:class:`Extension`), or None.
    Returns:
        (B + B2, vocab) the next-token logits: the running rows', then each admitted row's
        after its last new token.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.inner = model.model  # type: ignore[attr-defined]
        config = model.config  # type: ignore[attr-defined]
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads

    def attention_size(self, rows: int, width: int, past: int) -> int:
        """Scores an extension of ``rows`` x ``width`` new tokens over ``past`` cached ones
        weighs (``rows · heads · width · (past + width)``): above a bound on it the engine
        prefills in a pass of its own (``hf.FUSED_ATTENTION_LIMIT``)."""
        return rows * self.heads * width * (past + width)

    @torch.inference_mode()
    def __call__(self, tokens: Tensor, cache: Cache, mask: Tensor, positions: Tensor,
                 extension: Extension | None = None) -> Tensor:
        batch = tokens.shape[0]
        ids, pos = tokens, positions.reshape(-1)
        if extension is not None:
            rows, width = extension.ids.shape
            ids = torch.cat([ids, extension.ids.reshape(-1)])
            pos = torch.cat([pos, extension.positions.reshape(-1)])
        x = self.inner.embed_tokens(ids)  # (N, hidden)
        cos, sin = self.inner.rotary_emb(x[:, None], pos[:, None])  # (N, 1, head_dim)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        low = torch.finfo(x.dtype).min
        bias = torch.zeros(mask.shape, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill_(mask == 0, low)[:, None, None, :]  # (B, 1, 1, L + 1)
        if extension is not None:
            past = extension.mask.shape[1] - width
            columns = torch.arange(past + width, device=x.device)
            causal = columns[None, :] <= past + torch.arange(width, device=x.device)[:, None]
            allowed = causal[None] & (extension.mask[:, None, :] == 1)  # (B2, W, P + W)
            ext_bias = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device)
            ext_bias = ext_bias.masked_fill_(~allowed, low)[:, None]
        groups = self.heads // self.kv_heads
        for index, layer in enumerate(self.inner.layers):
            attention = layer.self_attn
            h = layer.input_layernorm(x)
            q = rotate(attention.q_proj(h).view(-1, self.heads, self.head_dim), cos, sin)
            k = rotate(attention.k_proj(h).view(-1, self.kv_heads, self.head_dim), cos, sin)
            v = attention.v_proj(h).view(-1, self.kv_heads, self.head_dim)
            keys, values = cache.layers[index].update(k[:batch, :, None], v[:batch, :, None])
            scores = torch.matmul(q[:batch].view(batch, self.kv_heads, groups, self.head_dim),
                                  keys.transpose(-1, -2)) * attention.scaling + bias
            weights = torch.softmax(scores, -1, dtype=torch.float32).to(values.dtype)
            out = torch.matmul(weights, values).reshape(batch, self.heads * self.head_dim)
            if extension is not None:
                out = torch.cat([out, self._extend(attention, extension.cache.layers[index],
                                                   q[batch:], k[batch:], v[batch:], ext_bias,
                                                   rows, width)])
            x = x + attention.o_proj(out)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        if extension is not None:  # each admitted row's last token
            last = batch + torch.arange(rows, device=x.device) * width + width - 1
            x = torch.cat([x[:batch], x[last]])
        return self.model.lm_head(self.inner.norm(x))  # type: ignore[operator]

    def _extend(self, attention: nn.Module, layer: object, q: Tensor, k: Tensor, v: Tensor,
                bias: Tensor, rows: int, width: int) -> Tensor:
        """Attention of the admitted rows' W tokens each (``q``: (B2·W, heads, head_dim))
        over their cached prefix and themselves; (B2·W, heads·head_dim)."""
        q = q.view(rows, width, self.heads, self.head_dim).transpose(1, 2)
        keys, values = layer.update(  # type: ignore[attr-defined]
            k.view(rows, width, self.kv_heads, self.head_dim).transpose(1, 2),
            v.view(rows, width, self.kv_heads, self.head_dim).transpose(1, 2))
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias,
                                             scale=attention.scaling,
                                             enable_gqa=self.heads != self.kv_heads)
        return out.transpose(1, 2).reshape(rows * width, self.heads * self.head_dim)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary position embedding of ``x`` (B, heads, head_dim) with ``cos``/``sin``
    (B, 1, head_dim): ``x·cos + rotate_half(x)·sin``, ``rotate_half([a, b]) = [-b, a]``."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin
