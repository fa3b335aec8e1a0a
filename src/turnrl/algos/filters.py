"""Batch filters (the ``algo.filters`` axis) and the per-turn reward helpers of DAPO
(Yu et al. 2025, arXiv:2503.14476), multi-turn.

Pure tensor functions. A filter says which episodes it keeps (``FILTERS``): a resampling
filter drops the others at collection, a loss filter masks their loss; the driver applies
every configured filter the same way and never branches on a name.
"""

from __future__ import annotations

import torch
from torch import Tensor

from turnrl.algos.registry import register_filter


def informative_groups(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """Dynamic sampling's test: which episodes belong to a group whose rewards differ.

    Args:
        rewards: (B,) episode returns.
        group_ids: (B,) long, episodes of one task share an id.
    Returns:
        (B,) bool, True where the episode's group has at least two distinct rewards; a group
        whose rewards are all equal gives every group advantage 0 and no gradient.
    """
    _, group = torch.unique(group_ids, return_inverse=True)
    n = int(group.max()) + 1 if group.numel() else 0
    high = torch.full((n,), -torch.inf, dtype=rewards.dtype).scatter_reduce(
        0, group, rewards, reduce="amax")
    low = torch.full((n,), torch.inf, dtype=rewards.dtype).scatter_reduce(
        0, group, rewards, reduce="amin")
    return (high > low)[group]


def turn_sums(values: Tensor, token_mask: Tensor, turn_index: Tensor, num_turns: int) -> Tensor:
    """``Σ_t values[b, t]`` over the sampled tokens of each turn, (B, K).

    Used to move per-token quantities (a KL penalty) onto ``turn_rewards``.
    """
    weights = torch.where(token_mask > 0, values, torch.zeros_like(values))
    index = turn_index.clamp(min=0, max=num_turns - 1)
    return torch.zeros(values.shape[0], num_turns, dtype=values.dtype).scatter_add(
        1, index, weights)


def turn_lengths(token_mask: Tensor, turn_index: Tensor, num_turns: int) -> Tensor:
    """Sampled tokens per turn, (B, K), from (B, T) ``token_mask`` and ``turn_index``."""
    return turn_sums(torch.ones_like(token_mask), token_mask, turn_index, num_turns)


def overlong_penalty(lengths: Tensor, turn_mask: Tensor, *, max_len: int,
                     cache: int) -> Tensor:
    """DAPO's soft overlong punishment of each turn's response length, (B, K).

    With ``L = max_len`` (the per-turn generation limit) and ``c = cache``::

        penalty(|y|) = 0                      if |y| <= L − c
                       ((L − c) − |y|) / c    if L − c < |y| <= L
                       −1                     if |y| > L

    added to the turn's reward; 0 on turns that do not exist (``turn_mask = 0``).
    """
    if not 0 < cache <= max_len:
        raise ValueError(f"overlong penalty needs 0 < cache <= max_len, got cache={cache}, "
                         f"max_len={max_len}")
    soft = ((max_len - cache) - lengths) / cache
    penalty = torch.where(lengths <= max_len - cache, torch.zeros_like(soft), soft)
    penalty = torch.where(lengths > max_len, torch.full_like(soft, -1.0), penalty)
    return penalty * turn_mask


@register_filter("dynamic_sampling", resample=True)
def dynamic_sampling(outcomes: Tensor, group_ids: Tensor, terminated: Tensor) -> Tensor:
    """DAPO's dynamic sampling: keep the groups whose outcomes differ
    (:func:`informative_groups`); the others carry no group signal and are replaced by
    fresh groups (up to ``train.max_sampling_tries`` collections a step)."""
    return informative_groups(outcomes, group_ids)


@register_filter("truncated", resample=False)
def truncated(outcomes: Tensor, group_ids: Tensor, terminated: Tensor) -> Tensor:
    """Truncated episodes (turn or context budget) contribute no loss: keep the terminated
    ones. They stay in the batch, so group baselines still count them."""
    return terminated.bool()
