"""Outcome- and token-level advantage estimators: ``fn(inputs: AdvantageInputs, **hparams) ->
AdvantageOutputs`` for ``grpo``, ``rloo``, ``reinforce_pp`` and ``gae``, plus the private helpers
they share with ``turnrl.algos.turn_advantages`` (input checks, outcomes, group statistics,
broadcast to tokens).

Shapes: ``B`` trajectories, ``T`` tokens, ``K`` agent turns. Notation:

- ``R_b = Σ_k turn_rewards[b, k] · turn_mask[b, k]``, the outcome (total reward) of trajectory b;
- a *group* is the set of trajectories sharing ``group_ids[b]`` (episodes of one task; ids
  are arbitrary longs, in any order), ``G`` its size;
- sampled tokens are those with ``token_mask == 1``; every estimator returns advantages that
  are 0 elsewhere, and never reads ``turn_index`` or rewards-on-tokens outside them.

Metrics (all prefixed ``adv/``): ``adv/mean, adv/std, adv/min, adv/max`` over the sampled
tokens of the batch; group estimators add ``adv/frac_zero_std_groups`` (fraction of groups
whose rewards are all equal, singletons included: groups that carry no learning signal);
``reinforce_pp`` and ``gae`` add ``adv/returns_mean``, ``gae`` adds ``adv/values_mean``.
The turn-aware estimators live in ``turnrl.algos.turn_advantages``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from turnrl.algos.functional import (
    discounted_cumsum,
    last_index,
    masked_mean,
    masked_stats,
    masked_whiten,
    next_sampled_index,
    outcome_rewards,
    place_turn_rewards,
    state_values,
)
from turnrl.algos.registry import register_advantage
from turnrl.types import AdvantageInputs, AdvantageOutputs

__all__ = [
    "gae",
    "grpo",
    "reinforce_pp",
    "rloo",
]


# ----------------------------------------------------------------------------- helpers


def _check_inputs(inputs: AdvantageInputs, name: str) -> None:
    """Raise a ValueError naming the field whose shape disagrees with ``token_mask``."""
    tm = inputs.token_mask
    if tm.dim() != 2:
        raise ValueError(f"advantage {name!r}: token_mask must be (B, T), got {tuple(tm.shape)}")
    B, T = tm.shape
    K = inputs.turn_rewards.shape[-1] if inputs.turn_rewards.dim() == 2 else -1
    expected: dict[str, tuple[Tensor | None, tuple[int, ...]]] = {
        "turn_index": (inputs.turn_index, (B, T)),
        "turn_rewards": (inputs.turn_rewards, (B, K)),
        "turn_mask": (inputs.turn_mask, (B, K)),
        "group_ids": (inputs.group_ids, (B,)),
        "terminated": (inputs.terminated, (B,)),
        "attention_mask": (inputs.attention_mask, (B, T)),
        "values": (inputs.values, (B, T)),
    }
    for field, (tensor, shape) in expected.items():
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(
                f"advantage {name!r}: AdvantageInputs.{field} has shape {tuple(tensor.shape)}, "
                f"expected {shape} (B={B} trajectories, T={T} tokens, K turns)"
            )


def _outcomes(inputs: AdvantageInputs) -> Tensor:
    """Outcomes ``R_b`` (B,) in a floating dtype."""
    rewards = inputs.turn_rewards
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.get_default_dtype())
    return outcome_rewards(rewards, inputs.turn_mask)


@dataclass(frozen=True)
class _Groups:  # not a NamedTuple: its ``index`` field would shadow ``tuple.index``
    index: Tensor  # (B,) long in [0, n_groups)
    size: Tensor  # (B,) float, size of the row's group
    total: Tensor  # (B,) sum of the scores in the row's group
    mean: Tensor  # (B,) group mean of the scores
    std: Tensor  # (B,) Bessel-corrected group std (0 for singletons)
    frac_flat: float  # fraction of groups whose scores are all equal


def _groups(scores: Tensor, group_ids: Tensor) -> _Groups:
    """Per-row group statistics of ``scores`` (B,), by scatter over ``unique`` ids."""
    _, index = torch.unique(group_ids, return_inverse=True)
    n = int(index.max()) + 1 if index.numel() else 0
    zeros = scores.new_zeros(n)
    size = zeros.index_add(0, index, torch.ones_like(scores))
    total = zeros.index_add(0, index, scores)
    mean = total / size.clamp(min=1)
    sq = zeros.index_add(0, index, (scores - mean[index]) ** 2)
    std = (sq / (size - 1).clamp(min=1)).sqrt()
    hi = zeros.scatter_reduce(0, index, scores, reduce="amax", include_self=False)
    lo = zeros.scatter_reduce(0, index, scores, reduce="amin", include_self=False)
    frac_flat = float((hi == lo).float().mean()) if n else 0.0
    return _Groups(index, size[index], total[index], mean[index], std[index], frac_flat)


def _group_relative(scores: Tensor, g: _Groups, *, norm_std: bool, eps: float) -> Tensor:
    """GRPO's per-trajectory advantage ``(R − mean_g) [/ (std_g + eps)]``, 0 for singletons."""
    centred = scores - g.mean
    if norm_std:
        centred = centred / (g.std + eps)
    return torch.where(g.size > 1, centred, scores.new_zeros(()))


def _broadcast(per_traj: Tensor, token_mask: Tensor) -> Tensor:
    """``(B,) -> (B, T)``: the row's value on its sampled tokens, 0 elsewhere."""
    mask = token_mask.bool()
    return torch.where(mask, per_traj[:, None], per_traj.new_zeros(()))


# ----------------------------------------------------------------------------- estimators


@register_advantage("grpo", needs_groups=True)
def grpo(inputs: AdvantageInputs, *, norm_std: bool = True, eps: float = 1e-6) -> AdvantageOutputs:
    """Group-relative advantage (GRPO, outcome supervision), broadcast to sampled tokens.

    ``A_b = (R_b − mean_g) / (std_g + eps)`` if ``norm_std`` else ``A_b = R_b − mean_g``,
    with ``mean_g``, ``std_g`` the mean and the Bessel-corrected (unbiased) std of the
    outcomes in b's group; a group of size 1 gets ``A_b = 0``. ``advantages[b, t] = A_b`` on
    sampled tokens, ``returns = advantages``.

    Shapes: ``inputs`` as ``AdvantageInputs``; ``advantages``, ``returns`` ``(B, T)``.

    Papers: Shao et al. 2024, "DeepSeekMath" (arXiv:2402.03300), GRPO; ``norm_std=False`` is
    Dr. GRPO, Liu et al. 2025, "Understanding R1-Zero-Like Training" (arXiv:2503.20783).
    """
    _check_inputs(inputs, "grpo")
    scores = _outcomes(inputs)
    g = _groups(scores, inputs.group_ids)
    per_traj = _group_relative(scores, g, norm_std=norm_std, eps=eps)
    advantages = _broadcast(per_traj, inputs.token_mask)
    metrics = masked_stats(advantages, inputs.token_mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = g.frac_flat
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


@register_advantage("rloo", needs_groups=True)
def rloo(inputs: AdvantageInputs) -> AdvantageOutputs:
    """REINFORCE leave-one-out: the baseline is the mean outcome of the other group members.

    ``A_b = R_b − 1/(G−1) · Σ_{j ≠ b, j in g} R_j = G/(G−1) · (R_b − mean_g)``; a group of
    size 1 gets 0. Broadcast to sampled tokens; ``returns = advantages``. Shapes ``(B, T)``.

    Papers: Kool, van Hoof & Welling 2019, "Buy 4 REINFORCE Samples, Get a Baseline for
    Free!" (ICLR workshop); Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE
    Style Optimization for Learning from Human Feedback in LLMs" (arXiv:2402.14740).
    """
    _check_inputs(inputs, "rloo")
    scores = _outcomes(inputs)
    g = _groups(scores, inputs.group_ids)
    others = (g.total - scores) / (g.size - 1).clamp(min=1)
    per_traj = torch.where(g.size > 1, scores - others, scores.new_zeros(()))
    advantages = _broadcast(per_traj, inputs.token_mask)
    metrics = masked_stats(advantages, inputs.token_mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = g.frac_flat
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


@register_advantage("reinforce_pp")
def reinforce_pp(inputs: AdvantageInputs, *, gamma: float = 1.0) -> AdvantageOutputs:
    """REINFORCE++: token-level discounted return-to-go, whitened over the batch.

    Turn k's reward sits on the last sampled token of turn k (``turn_index == k`` and
    ``token_mask == 1``): ``r_t``. Over the sampled tokens of each trajectory, in order
    (observation tokens are skipped; the discount steps once per sampled token),
    ``G_t = r_t + γ · G_{t'}`` (``t'`` the next sampled token, ``G = 0`` past the last), then
    ``A = (G − mean) / sqrt(var + 1e-8)`` with the mean and unbiased variance over all
    sampled tokens of the batch (verl's ``masked_whiten``). With ``γ = 1`` and an outcome-only
    reward, every sampled token of b has ``G_t = R_b`` before whitening.

    Shapes: ``advantages`` ``(B, T)``; ``returns = advantages`` (critic-free); the raw
    ``G`` is reported as ``adv/returns_mean``.

    Paper: Hu 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large
    Language Models" (arXiv:2501.03262).
    """
    _check_inputs(inputs, "reinforce_pp")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"advantage 'reinforce_pp': gamma must lie in [0, 1], got {gamma}")
    rewards = inputs.turn_rewards
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.get_default_dtype())
    mask = inputs.token_mask.bool()
    token_rewards = place_turn_rewards(mask, inputs.turn_index, rewards, inputs.turn_mask)
    returns_to_go = discounted_cumsum(token_rewards, mask, gamma)
    advantages = masked_whiten(returns_to_go, mask)
    metrics = masked_stats(advantages, mask, "adv/")
    metrics["adv/returns_mean"] = float(masked_mean(returns_to_go.detach(), mask))
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


@register_advantage("gae", needs_critic=True)
def gae(
    inputs: AdvantageInputs, *, gamma: float = 1.0, lam: float = 0.95, whiten: bool = False
) -> AdvantageOutputs:
    """Generalized advantage estimation over the sampled tokens of each trajectory.

    The steps are the sampled tokens in order; observation tokens between two turns are part
    of the environment's transition, so consecutive sampled tokens are consecutive steps even
    across turns. For a sampled token t with next sampled token t':

    - ``V_t = values[b, t − 1]`` (the critic's value of the state in which t was sampled);
    - ``r_t`` = turn k's reward if t is the last sampled token of turn k, else 0;
    - ``V_next = values[b, t' − 1]``; for the last sampled token ``V_next = 0`` if
      ``terminated[b]``, else the bootstrap ``values[b, last real position]`` (the last
      index where ``attention_mask == 1``, or t itself when ``attention_mask`` is None);
    - ``δ_t = r_t + γ V_next − V_t``,  ``A_t = δ_t + γλ A_{t'}`` (``A = δ`` at the last token);
    - ``returns_t = A_t + V_t`` (the critic's targets).

    With ``γ = λ = 1``, ``A_t = Σ_{s ≥ t} r_s + V_boot − V_t`` (reward-to-go minus value).
    A token sampled at position 0 has no preceding state; ``values[b, 0]`` stands in for it.
    ``whiten=True`` whitens the advantages over the batch's sampled tokens (returns are not).

    Shapes: ``inputs.values`` ``(B, T)`` required; ``advantages``, ``returns`` ``(B, T)``, 0
    outside ``token_mask``.

    Paper: Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
    Advantage Estimation" (ICLR, arXiv:1506.02438).
    """
    _check_inputs(inputs, "gae")
    if inputs.values is None:
        raise ValueError(
            "advantage 'gae' needs a critic: AdvantageInputs.values is None. Train with a "
            "value head (a critic) or pick a critic-free estimator: grpo, rloo, reinforce_pp"
        )
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"advantage 'gae': gamma and lam must lie in [0, 1], got {gamma}, {lam}")
    mask = inputs.token_mask.bool()
    values = inputs.values
    if not values.is_floating_point():
        values = values.to(torch.get_default_dtype())
    T = mask.shape[1]
    token_rewards = place_turn_rewards(
        mask, inputs.turn_index, inputs.turn_rewards.to(values.dtype), inputs.turn_mask
    )
    v_state = state_values(values)  # V_t = values[t - 1]
    nxt = next_sampled_index(mask)
    next_values = v_state.gather(1, nxt.clamp(max=T - 1))
    real = inputs.attention_mask if inputs.attention_mask is not None else mask
    bootstrap = values.gather(1, last_index(real).clamp(min=0)[:, None])
    final = torch.where(inputs.terminated.bool()[:, None], values.new_zeros(()), bootstrap)
    next_values = torch.where(nxt < T, next_values, final)
    deltas = torch.where(mask, token_rewards + gamma * next_values - v_state, 0.0)
    advantages = discounted_cumsum(deltas, mask, gamma * lam)
    returns = torch.where(mask, advantages + v_state, 0.0)
    if whiten:
        advantages = masked_whiten(advantages, mask)
    metrics = masked_stats(advantages, mask, "adv/")
    metrics["adv/returns_mean"] = float(masked_mean(returns.detach(), mask))
    metrics["adv/values_mean"] = float(masked_mean(v_state.detach(), mask))
    return AdvantageOutputs(advantages, returns, metrics)
