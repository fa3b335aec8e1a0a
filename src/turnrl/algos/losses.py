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

__all__ = ["cispo", "gspo", "pg", "ppo_clip", "value_loss"]


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


@register_policy_loss("pg")
def pg(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    token_mask: Tensor,
) -> tuple[Tensor, dict[str, float]]:
    """Plain REINFORCE, ratio-free: ``loss = −A · logp`` per token, 0 where ``token_mask`` is 0.

    The gradient w.r.t. ``logp`` is ``−A``: ``ppo_clip``'s gradient at ``r ≡ 1``.
    ``old_logprobs`` is not read (every update is taken as on-policy). The value
    ``−A·logp`` is the surrogate, not a quantity to monitor.

    Shapes: all inputs ``(B, T)``; returns the per-token loss ``(B, T)`` and no metrics.

    Paper: Williams 1992, "Simple Statistical Gradient-Following Algorithms for
    Connectionist Reinforcement Learning" (Machine Learning 8).
    """
    mask = token_mask.bool()
    loss = -torch.where(mask, advantages, 0.0) * torch.where(mask, logprobs, 0.0)
    return loss, {}


@register_policy_loss("gspo")
def gspo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    token_mask: Tensor,
    *,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
    max_log_ratio: float = 20.0,
) -> tuple[Tensor, dict[str, float]]:
    """GSPO: PPO's clipped surrogate on a sequence-level, length-normalised ratio.

    ``s_b = exp(clamp(mean_{t: m[b,t]=1}(logp − logp_old), ±max_log_ratio))`` over ALL sampled
    tokens of trajectory ``b`` (every turn; observation tokens excluded). Token form
    ("GSPO-token"): ``s_{b,t} = sg[s_b] · π_t / sg[π_t]``, whose value is ``s_b`` and whose
    gradient is ``s_b · ∇logp_t``. Per token:
    ``loss = −min(s_{b,t}·A, clip(s_{b,t}, 1 − clip_low, 1 + clip_high)·A)``; 0 where
    ``token_mask`` is 0. The clip tests the sequence ratio ``s_b``, so all tokens of a
    sequence with a sequence-constant ``A`` are clipped together; with a per-token ``A`` the
    min is still taken per token (by the sign of ``A_t``). With ``seq_mean_token_mean`` and a
    sequence-constant ``A`` this is exactly the paper's sequence objective
    ``−(1/G) Σ_b min(s_b A_b, clip(s_b) A_b)`` in value and gradient. With one sampled token
    per row it equals ``ppo_clip`` with the same bounds. Defaults are the paper's
    (``3e-4``, ``4e-4``: the sequence ratio is a geometric mean, so it moves far less than
    token ratios). The gradient is not cut where the clamp at ``max_log_ratio`` is active.

    Shapes: all inputs ``(B, T)``; returns the per-token loss ``(B, T)`` and metrics (over
    rows with at least one sampled token): ``loss/clipfrac`` (fraction of sequences where
    the clipped term is active on some token), ``loss/ratio_mean`` (mean of ``s_b``).

    Paper: Zheng et al. 2025, "Group Sequence Policy Optimization" (arXiv:2507.18071).
    """
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"gspo: clip_low and clip_high must be >= 0, got {clip_low}, {clip_high}")
    mask = token_mask.bool()
    logp = torch.where(mask, logprobs, 0.0)
    log_ratio = logp - torch.where(mask, old_logprobs, 0.0)
    seq_log_ratio = masked_mean(log_ratio, mask, dim=1).clamp(-max_log_ratio, max_log_ratio)
    seq_ratio = seq_log_ratio.detach().exp()  # (B,)
    ratio = seq_ratio[:, None] * (logp - logp.detach()).exp()  # value s_b, gradient s_b ∇logp
    adv = torch.where(mask, advantages, 0.0)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.where(mask, torch.maximum(unclipped, clipped), 0.0)
    with torch.no_grad():
        has_tokens = mask.any(dim=1)
        seq_clipped = (mask & (clipped > unclipped)).any(dim=1)
        metrics = {
            "loss/clipfrac": float(masked_mean(seq_clipped.to(loss.dtype), has_tokens)),
            "loss/ratio_mean": float(masked_mean(seq_ratio, has_tokens)),
        }
    return loss, metrics


@register_policy_loss("cispo")
def cispo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    token_mask: Tensor,
    *,
    clip_high: float = 5.0,
    clip_low: float | None = None,
    max_log_ratio: float = 20.0,
) -> tuple[Tensor, dict[str, float]]:
    """CISPO: REINFORCE weighted by a clipped, stop-gradient importance ratio.

    ``r = exp(clamp(logp − logp_old, ±max_log_ratio))``,
    ``w = sg[clip(r, 1 − clip_low, 1 + clip_high)]`` (no lower bound when ``clip_low`` is
    None), ``loss = −w · A · logp`` per token, 0 where ``token_mask`` is 0. The weight is
    clipped, not the token: every sampled token keeps the gradient ``−w·A`` (PPO's clip
    zeroes the gradient of clipped tokens). With ``r ≡ 1``: ``w = 1`` and the gradient is
    ``pg``'s ``−A``.

    Shapes: all inputs ``(B, T)``; returns the per-token loss ``(B, T)`` and metrics:
    ``loss/clipfrac`` (fraction of sampled tokens whose weight was clipped),
    ``loss/weight_mean`` (mean of ``w``), ``loss/ratio_mean`` (mean of ``r``).

    Paper: MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning
    Attention" (arXiv:2506.13585), section 3.1.
    """
    if clip_high < 0 or (clip_low is not None and clip_low < 0):
        raise ValueError(f"cispo: clip_low and clip_high must be >= 0, got {clip_low}, {clip_high}")
    mask = token_mask.bool()
    logp = torch.where(mask, logprobs, 0.0)
    with torch.no_grad():
        log_ratio = (logp - torch.where(mask, old_logprobs, 0.0)).clamp(
            -max_log_ratio, max_log_ratio
        )
        ratio = log_ratio.exp()
        lower = None if clip_low is None else 1.0 - clip_low
        weight = ratio.clamp(lower, 1.0 + clip_high)
    loss = -weight * torch.where(mask, advantages, 0.0) * logp
    with torch.no_grad():
        metrics = {
            "loss/clipfrac": float(masked_mean((weight != ratio).to(loss.dtype), mask)),
            "loss/weight_mean": float(masked_mean(weight, mask)),
            "loss/ratio_mean": float(masked_mean(ratio, mask)),
        }
    return loss, metrics
