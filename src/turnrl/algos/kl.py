"""Per-token estimators of KL(π‖π_ref) from tokens sampled from π: ``(B, T), (B, T) -> (B, T)``.

With ``log ρ = logp − logq`` (``logq = ref_logprobs``), under samples from π:

- ``k1 = log ρ``: unbiased, high variance, can be negative;
- ``k2 = ½ (log ρ)²``: biased (exact to second order), low variance, ≥ 0;
- ``k3 = ρ⁻¹ − 1 + log ρ = exp(logq − logp) − (logq − logp) − 1``: unbiased, low variance,
  ≥ 0. ``logq − logp`` is clamped to [−20, 20] and the result to [−10, 10], as verl does.

The estimates are not masked: the caller multiplies by its token mask and aggregates.

Reference: J. Schulman, "Approximating KL Divergence" (blog post, 2020,
http://joschu.net/blog/kl-approx.html). k3 as a loss term: Shao et al. 2024, DeepSeekMath
(arXiv:2402.03300), GRPO's KL penalty.
"""

from __future__ import annotations

from torch import Tensor

from turnrl.algos.registry import register_kl_estimator

__all__ = ["k1", "k2", "k3"]

K3_LOG_RATIO_CLAMP = 20.0
K3_OUTPUT_CLAMP = 10.0


@register_kl_estimator("k1")
def k1(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """``k1 = logp − logq`` per token, ``(B, T)``."""
    return logprobs - ref_logprobs


@register_kl_estimator("k2")
def k2(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """``k2 = ½ (logp − logq)²`` per token, ``(B, T)``."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


@register_kl_estimator("k3")
def k3(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """``k3 = exp(u) − u − 1`` with ``u = clamp(logq − logp, ±20)``, clamped to [−10, 10]."""
    u = (ref_logprobs - logprobs).clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
    return (u.expm1() - u).clamp(-K3_OUTPUT_CLAMP, K3_OUTPUT_CLAMP)  # expm1: no rounding below 0
