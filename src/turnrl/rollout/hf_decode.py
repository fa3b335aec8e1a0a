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

Only architectures whose attention is exactly "project, rotate, cache, attend, project"
are served (:func:`decode_step_for`); any other model decodes through ``model(...)``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from transformers.cache_utils import Cache

__all__ = ["DecodeStep", "decode_step_for"]

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


class DecodeStep:
    """``logits = step(tokens, cache, mask, positions)``: one token per row through ``model``.

    Args (of a call):
        tokens: (B,) the token each row feeds.
        cache: the engine's cache, one layer per decoder layer, keys/values
            (B, kv_heads, L, head_dim); the step appends this token's keys and values.
        mask: (B, L + 1) 1 where a row attends (its own tokens, this one included), 0 on its
            left padding.
        positions: (B, 1) each row's position id for this token.
    Returns:
        (B, vocab) the next-token logits.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.inner = model.model  # type: ignore[attr-defined]
        config = model.config  # type: ignore[attr-defined]
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads

    @torch.inference_mode()
    def __call__(self, tokens: Tensor, cache: Cache, mask: Tensor, positions: Tensor) -> Tensor:
        batch = tokens.shape[0]
        x = self.inner.embed_tokens(tokens)  # (B, hidden)
        cos, sin = self.inner.rotary_emb(x[:, None], positions)  # (B, 1, head_dim)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        bias = torch.zeros(mask.shape, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill_(mask == 0, torch.finfo(x.dtype).min)[:, None, None, :]
        groups = self.heads // self.kv_heads
        for index, layer in enumerate(self.inner.layers):
            attention = layer.self_attn
            h = layer.input_layernorm(x)
            q = rotate(attention.q_proj(h).view(batch, self.heads, self.head_dim), cos, sin)
            k = rotate(attention.k_proj(h).view(batch, self.kv_heads, self.head_dim), cos, sin)
            v = attention.v_proj(h).view(batch, self.kv_heads, self.head_dim)
            keys, values = cache.layers[index].update(k[:, :, None], v[:, :, None])
            scores = torch.matmul(q.view(batch, self.kv_heads, groups, self.head_dim),
                                  keys.transpose(-1, -2)) * attention.scaling + bias
            weights = torch.softmax(scores, -1, dtype=torch.float32).to(values.dtype)
            out = torch.matmul(weights, values).reshape(batch, self.heads * self.head_dim)
            x = x + attention.o_proj(out)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.model.lm_head(self.inner.norm(x))  # type: ignore[operator]


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary position embedding of ``x`` (B, heads, head_dim) with ``cos``/``sin``
    (B, 1, head_dim): ``x·cos + rotate_half(x)·sin``, ``rotate_half([a, b]) = [-b, a]``."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin
