"""Policy losses (registered) and the critic's value loss (a plain function).

Every loss returns a per-token loss ``(B, T)``, 0 outside ``token_mask``; a registered
aggregation (``turnrl.algos.aggregation``) turns it into a scalar. Metrics are prefixed
``loss/`` and computed without gradient; over an empty mask they are 0.0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from turnrl.algos.functional import masked_mean
from turnrl.algos.registry import register_policy_loss

__all__ = ["ppo_clip", "value_loss"]


@register_policy_loss("ppo_clip")
def ppo_clip(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    token_mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_c: float | None = None,
    max_log_ratio: float = 20.0,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate, per token, with clip-higher and optional dual clip.

    ``r = exp(clamp(logp − logp_old, −max_log_ratio, max_log_ratio))``,
    ``loss = −min(r·A, clip(r, 1 − clip_low, 1 + clip_high)·A)``; with ``clip_c`` (> 1), for
    ``A < 0``: ``loss = min(loss, −clip_c·A)`` (dual clip). 0 where ``token_mask`` is 0.
    With ``r ≡ 1`` the loss is ``−A`` and its gradient w.r.t. ``logp`` is ``−A``.

    Shapes: all inputs ``(B, T)``; returns the per-token loss ``(B, T)`` and metrics:
    ``loss/clipfrac`` (fraction of tokens where the clipped term is the active one),
    ``loss/approx_kl`` (masked mean of ``(r − 1) − log r``, the k3 estimate of
    KL(π_old‖π) from tokens sampled from π_old), ``loss/ratio_mean``, ``loss/ratio_max``,
    and ``loss/dual_clipfrac`` when ``clip_c`` is set.

    Papers: Schulman et al. 2017, "Proximal Policy Optimization Algorithms"
    (arXiv:1707.06347); clip-higher from DAPO, Yu et al. 2025 (arXiv:2503.14476); dual clip
    from Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep RL"
    (arXiv:1912.09729).
    """
    if clip_low < 0 or clip_high < 0:
        raise ValueError(
            f"ppo_clip: clip_low and clip_high must be >= 0, got {clip_low}, {clip_high}"
        )
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"ppo_clip: clip_c (dual clip) must be > 1, got {clip_c}")
    mask = token_mask.bool()
    # where() right after the subtraction: masked entries (even inf/nan) reach no exp().
    log_ratio = torch.where(mask, logprobs - old_logprobs, 0.0)
    log_ratio = log_ratio.clamp(-max_log_ratio, max_log_ratio)
    ratio = log_ratio.exp()
    adv = torch.where(mask, advantages, 0.0)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    metrics: dict[str, float] = {}
    if clip_c is not None:
        dual = torch.where(adv < 0, torch.minimum(loss, -clip_c * adv), loss)
        with torch.no_grad():
            metrics["loss/dual_clipfrac"] = float(masked_mean((dual < loss).float(), mask))
        loss = dual
    loss = torch.where(mask, loss, 0.0)
    with torch.no_grad():
        metrics["loss/clipfrac"] = float(masked_mean((clipped > unclipped).float(), mask))
        approx_kl = (ratio - 1.0) - log_ratio
        metrics["loss/approx_kl"] = float(masked_mean(approx_kl, mask))
        metrics["loss/ratio_mean"] = float(masked_mean(ratio, mask))
        metrics["loss/ratio_max"] = float(ratio[mask].max()) if bool(mask.any()) else 0.0
    return loss, metrics


def value_loss(
    values: Tensor,
    returns: Tensor,
    token_mask: Tensor,
    *,
    old_values: Tensor | None = None,
    clip: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Critic regression loss per token, with optional PPO value clipping.

    ``loss = ½ (V − R)²``; with ``old_values`` and ``clip``:
    ``V_clip = V_old + clamp(V − V_old, −clip, clip)``,
    ``loss = ½ max((V − R)², (V_clip − R)²)``. 0 where ``token_mask`` is 0.

    Shapes: all ``(B, T)``; returns the per-token loss ``(B, T)`` and metrics
    (``loss/vf_clipfrac``, the fraction of tokens where the clipped term is larger, only when
    clipping). Aggregate with a registered aggregation, like the policy loss.

    Paper: Schulman et al. 2017 (arXiv:1707.06347), value clipping as in OpenAI baselines'
    PPO2 (Dhariwal et al. 2017).
    """
    if clip is not None and old_values is None:
        raise ValueError("value_loss: clip needs old_values (the critic's values at rollout)")
    mask = token_mask.bool()
    error = torch.where(mask, values - returns, 0.0)
    loss = error**2
    metrics: dict[str, float] = {}
    if clip is not None and old_values is not None:
        if clip <= 0:
            raise ValueError(f"value_loss: clip must be > 0, got {clip}")
        old = torch.where(mask, old_values, 0.0)
        value_clipped = old + (torch.where(mask, values, 0.0) - old).clamp(-clip, clip)
        clipped_loss = torch.where(mask, value_clipped - returns, 0.0) ** 2
        with torch.no_grad():
            metrics["loss/vf_clipfrac"] = float(masked_mean((clipped_loss > loss).float(), mask))
        loss = torch.maximum(loss, clipped_loss)
    return 0.5 * loss, metrics
