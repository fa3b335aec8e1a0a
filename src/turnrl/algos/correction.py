"""Corrections around the policy loss: behaviour-policy importance weights and KL as a reward.

- ``behaviour_correction``: per-token weights for rollouts sampled by a different engine or
  an older policy than the learner's ``old_logprobs`` (truncated or masked importance
  sampling); they multiply the per-token policy loss, outside the policy ratio.
- ``kl_token_penalty``: ``−coef · KL`` per token, a reward penalty (``kl.mode=reward``).
- ``AdaptiveKLController``: the proportional controller of the KL coefficient.

Shapes: ``B`` trajectories, ``T`` tokens; ``token_mask`` is 1 on sampled tokens. Pure
functions (the controller holds one float); metrics are prefixed ``loss/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import Tensor

from turnrl.algos.filters import turn_sums
from turnrl.algos.functional import masked_mean, masked_var
from turnrl.algos.registry import (
    KL_ESTIMATORS,
    register_correction,
    register_kl_placement,
)

__all__ = [
    "BEHAVIOUR_MODES",
    "AdaptiveKLController",
    "BehaviourMode",
    "behaviour_correction",
    "kl_in_loss",
    "kl_in_reward",
    "kl_token_penalty",
    "masked_is",
    "no_correction",
    "truncated_is",
]

BehaviourMode = Literal["none", "tis", "mask"]
BEHAVIOUR_MODES: tuple[str, ...] = ("none", "tis", "mask")
IS_LOG_RATIO_CLAMP = 20.0


def behaviour_correction(
    learner_old_logprobs: Tensor,
    sampling_logprobs: Tensor,
    token_mask: Tensor,
    *,
    mode: BehaviourMode,
    threshold: float = 2.0,
) -> tuple[Tensor, dict[str, float]]:
    """Per-token importance weights from the sampling policy to the learner's old policy.

    ``w = exp(clamp(logp_old − logp_sampling, ±20))`` with ``logp_old`` the learner's
    log-probs of the batch before the update and ``logp_sampling`` those reported by the
    rollout engine. ``C = threshold``:

    - ``none``: ``1`` (no correction);
    - ``tis`` (truncated IS): ``min(w, C)``;
    - ``mask`` (rejection): ``w · 1[w ≤ C]``: a kept token is still weighted by ``w``
      (not by 1); a token with ``w > C`` weighs 0. Only too-large weights are rejected.

    Weights are 0 where ``token_mask`` is 0 and carry no gradient. Use:
    ``per_token_loss · weight`` before aggregation, with ``ppo_clip``'s ratio still
    ``π / π_old`` (the correction sits outside the policy ratio and its clip).

    Shapes: ``(B, T)`` inputs; returns the weights ``(B, T)`` and metrics over sampled
    tokens: ``loss/is_weight_mean``, ``loss/is_weight_max`` (of the returned weight),
    ``loss/is_clipfrac`` (fraction of tokens whose weight was truncated or rejected; 0 for
    ``none``), ``loss/is_logratio_std`` (unbiased std of the clamped ``log w``, the
    sampler–learner mismatch, reported in every mode).

    Reference: Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy
    RL Training" (blog post, truncated importance sampling); Espeholt et al. 2018, IMPALA
    (arXiv:1802.01561), for truncated importance weights.
    """
    if mode not in BEHAVIOUR_MODES:
        raise ValueError(
            f"behaviour_correction: mode must be one of {BEHAVIOUR_MODES}, got {mode!r}"
        )
    if not threshold > 0:
        raise ValueError(f"behaviour_correction: threshold must be > 0, got {threshold}")
    mask = token_mask.bool()
    with torch.no_grad():
        log_w = torch.where(mask, learner_old_logprobs - sampling_logprobs, 0.0)
        log_w = log_w.clamp(-IS_LOG_RATIO_CLAMP, IS_LOG_RATIO_CLAMP)
        w = log_w.exp()
        over = mask & (w > threshold)
        if mode == "tis":
            weight = w.clamp(max=threshold)
        elif mode == "mask":
            weight = torch.where(over, 0.0, w)
        else:
            weight = torch.ones_like(w)
            over = torch.zeros_like(mask)
        weight = torch.where(mask, weight, 0.0)
        metrics = {
            "loss/is_weight_mean": float(masked_mean(weight, mask)),
            "loss/is_weight_max": float(weight[mask].max()) if bool(mask.any()) else 0.0,
            "loss/is_clipfrac": float(masked_mean(over.to(weight.dtype), mask)),
            "loss/is_logratio_std": float(masked_var(log_w, mask).sqrt()),
        }
    return weight, metrics


def kl_token_penalty(
    logprobs: Tensor,
    ref_logprobs: Tensor,
    token_mask: Tensor,
    *,
    estimator: str,
    coef: float,
) -> Tensor:
    """Per-token KL reward penalty: ``−coef · KL_ESTIMATORS[estimator](logp, logp_ref) · m``.

    The reward form of the KL term (``kl.mode=reward``): added to the token rewards before
    the advantages, instead of ``coef · KL`` in the loss. Computed without gradient (a reward
    is a constant); 0 where ``token_mask`` is 0, whatever the log-probs hold there.

    Shapes: ``(B, T)`` inputs; returns ``(B, T)``. Unknown ``estimator`` names raise the
    registry's error listing the choices.

    Paper: Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences"
    (arXiv:1909.08593); Ouyang et al. 2022, InstructGPT (arXiv:2203.02155).
    """
    kl_fn = KL_ESTIMATORS[estimator]
    if coef < 0:
        raise ValueError(f"kl_token_penalty: coef must be >= 0, got {coef}")
    mask = token_mask.bool()
    with torch.no_grad():
        logp = torch.where(mask, logprobs, 0.0)
        ref = torch.where(mask, ref_logprobs, 0.0)
        return torch.where(mask, -coef * kl_fn(logp, ref), 0.0)


@register_correction("none", needs_learner_logprobs=False)
def no_correction(sampling_logprobs: Tensor, learner_logprobs: Tensor | None,
                  token_mask: Tensor, *, threshold: float = 2.0
                  ) -> tuple[Tensor, Tensor | None, dict[str, float]]:
    """No correction: the ratio is taken against the sampling log-probs, no loss weights."""
    return sampling_logprobs, None, {}


def _corrected(mode: BehaviourMode, sampling_logprobs: Tensor, learner_logprobs: Tensor | None,
               token_mask: Tensor, threshold: float
               ) -> tuple[Tensor, Tensor | None, dict[str, float]]:
    if learner_logprobs is None:
        raise ValueError(f"behaviour correction {mode!r} needs the learner's log-probs")
    weights, metrics = behaviour_correction(learner_logprobs, sampling_logprobs, token_mask,
                                            mode=mode, threshold=threshold)
    return learner_logprobs, weights, metrics


@register_correction("tis", needs_learner_logprobs=True)
def truncated_is(sampling_logprobs: Tensor, learner_logprobs: Tensor | None,
                 token_mask: Tensor, *, threshold: float = 2.0
                 ) -> tuple[Tensor, Tensor | None, dict[str, float]]:
    """Truncated IS: the ratio against the learner's own old log-probs, the loss weighted
    by ``min(w, C)`` (:func:`behaviour_correction`, mode ``tis``)."""
    return _corrected("tis", sampling_logprobs, learner_logprobs, token_mask, threshold)


@register_correction("mask", needs_learner_logprobs=True)
def masked_is(sampling_logprobs: Tensor, learner_logprobs: Tensor | None,
              token_mask: Tensor, *, threshold: float = 2.0
              ) -> tuple[Tensor, Tensor | None, dict[str, float]]:
    """Masked IS: as ``tis``, with weights ``w · 1[w ≤ C]`` (mode ``mask``)."""
    return _corrected("mask", sampling_logprobs, learner_logprobs, token_mask, threshold)


@register_kl_placement("loss")
def kl_in_loss(kl: Tensor, token_mask: Tensor, turn_index: Tensor, num_turns: int, *,
               coef: float) -> tuple[Tensor | None, float]:
    """``+ coef · KL`` as a loss term (aggregated like the policy loss): no reward penalty
    (None), loss coefficient ``coef``."""
    return None, coef


@register_kl_placement("reward")
def kl_in_reward(kl: Tensor, token_mask: Tensor, turn_index: Tensor, num_turns: int, *,
                 coef: float) -> tuple[Tensor | None, float]:
    """``− coef · KL`` per sampled token, summed over each turn's tokens into a turn reward
    penalty (B, K) (Ziegler et al. 2019); loss coefficient 0. Carries no gradient."""
    with torch.no_grad():
        penalty = torch.where(token_mask.bool(), -coef * kl, 0.0)
    return turn_sums(penalty, token_mask, turn_index, num_turns), 0.0


@dataclass
class AdaptiveKLController:
    """Proportional control of the KL coefficient towards a target KL.

    ``e = clip(KL / target − 1, −0.2, 0.2)``, ``coef ← coef · (1 + e · n_steps / horizon)``;
    ``n_steps`` is the number of samples (trajectories) the KL was measured on, ``horizon``
    the number of samples over which the error should be corrected. Each update moves the
    coefficient by at most a factor ``1 ± 0.2 · n_steps / horizon``. The only state is
    ``coef``.

    Paper: Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences"
    (arXiv:1909.08593), section 2.2.
    """

    coef: float
    target: float
    horizon: float = 10000.0

    MAX_ERROR: ClassVar[float] = 0.2

    def __post_init__(self) -> None:
        if self.coef < 0 or not self.target > 0 or not self.horizon > 0:
            raise ValueError(
                "AdaptiveKLController: needs coef >= 0, target > 0, horizon > 0, got "
                f"coef={self.coef}, target={self.target}, horizon={self.horizon}"
            )

    def update(self, current_kl: float, n_steps: int) -> float:
        """Move ``coef`` towards the target KL; returns the new coefficient."""
        if n_steps < 0 or not math.isfinite(current_kl):
            raise ValueError(
                "AdaptiveKLController.update: needs a finite current_kl and "
                f"n_steps >= 0, got current_kl={current_kl}, n_steps={n_steps}"
            )
        error = min(max(current_kl / self.target - 1.0, -self.MAX_ERROR), self.MAX_ERROR)
        self.coef = self.coef * (1.0 + error * n_steps / self.horizon)
        return self.coef
