"""Reward shaping: every change from the env's per-turn rewards to the rewards the
advantage estimators read, in one pure function.

With ``r_{b,k}`` the env's reward of turn k, ``w_env`` its weight, ``F_b = Σ_i w_i f_i(b)``
the weighted reward terms (``reward.terms``, on the last turn ``L_b``):

    outcome turn rewards  o_{b,k} = w_env · r_{b,k} + 1[k = L_b] · F_b
    a failed episode      o_{b,k} = 1[k = L_b] · error_reward   (``env.on_error=score``)
    final turn rewards    r'_{b,k} = o_{b,k} + overlong_{b,k} + kl_{b,k}

``overlong`` is DAPO's soft penalty on each turn's length (``overlong_cache > 0``) and
``kl`` the per-turn KL penalty of ``algo.kl_mode=reward`` (0 otherwise). ``outcomes`` are
``Σ_k o_{b,k}``: what batch filters compare and ``reward/mean`` reports. An episode is kept
unless it failed and failures are excluded, or it failed without sampling a token.

Shapes: ``B`` episodes, ``K`` turns. No I/O, no config objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from turnrl.algos.filters import overlong_penalty

__all__ = ["RewardInputs", "ShapedRewards", "shape_rewards"]


@dataclass(frozen=True)
class RewardInputs:
    """What reward shaping reads, per episode and turn."""

    env_rewards: Tensor  # (B, K) the env's reward of each turn
    turn_mask: Tensor  # (B, K) 1 where the turn exists
    term_totals: Tensor  # (B,) Σ_i w_i f_i, the weighted reward terms
    failed: Tensor  # (B,) bool: the env or a reward function failed
    sampled: Tensor  # (B,) bool: the episode has sampled tokens
    turn_lengths: Tensor | None = None  # (B, K) sampled tokens per turn (overlong penalty)
    kl_penalty: Tensor | None = None  # (B, K) per-turn KL penalty (already − coef · KL)


@dataclass(frozen=True)
class ShapedRewards:
    turn_rewards: Tensor  # (B, K) final per-turn rewards
    outcomes: Tensor  # (B,) Σ_k of the outcome turn rewards (before length and KL penalties)
    keep: Tensor  # (B,) bool: the episode belongs in the batch
    metrics: dict[str, float]


def shape_rewards(x: RewardInputs, *, env_weight: float = 1.0, score_failures: bool = False,
                  error_reward: float = 0.0, max_len: int = 0,
                  overlong_cache: int = 0) -> ShapedRewards:
    """The rewards of a batch of episodes (see the module docstring for the formula).

    ``score_failures=False`` leaves failed episodes out (``keep`` False); True keeps those
    with sampled tokens at ``error_reward``. ``overlong_cache > 0`` needs ``turn_lengths``
    and the per-turn limit ``max_len``. Metrics: ``reward/overlong_penalty`` and
    ``reward/kl_penalty`` (mean per episode) when those terms are on.
    """
    mask = x.turn_mask > 0
    k = x.turn_mask.shape[1]
    num_turns = mask.sum(-1)
    last = torch.nn.functional.one_hot((num_turns - 1).clamp(min=0).long(), k).bool()
    last &= (num_turns > 0)[:, None]
    zero = x.env_rewards.new_zeros(())
    played = torch.where(mask, env_weight * x.env_rewards, zero)
    played = played + torch.where(last, x.term_totals[:, None].to(played.dtype), zero)
    failed = x.failed.bool()
    if score_failures:
        at_error = torch.where(last, torch.full_like(played, error_reward), zero)
        outcome = torch.where(failed[:, None], at_error, played)
        keep = ~failed | x.sampled.bool()
    else:
        outcome = played
        keep = ~failed
    rewards, metrics = outcome, {}
    if overlong_cache:
        if x.turn_lengths is None:
            raise ValueError("shape_rewards: overlong_cache > 0 needs turn_lengths")
        penalty = overlong_penalty(x.turn_lengths, x.turn_mask, max_len=max_len,
                                   cache=overlong_cache)
        rewards = rewards + penalty
        metrics["reward/overlong_penalty"] = float(penalty.sum(-1).mean())
    if x.kl_penalty is not None:
        rewards = rewards + x.kl_penalty
        metrics["reward/kl_penalty"] = float(x.kl_penalty.sum(-1).mean())
    return ShapedRewards(rewards, outcome.sum(-1), keep, metrics)
