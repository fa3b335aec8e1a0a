"""Turn-aware advantage estimators: ``reinforce_pp_baseline``, ``grpo_passk``, ``turn_gae``,
``trloo``, ``turn_grpo`` and ``gigpo``, with their turn-level helpers.

Same signature, shapes and notation as ``turnrl.algos.advantages`` (``B`` trajectories, ``T``
tokens, ``K`` agent turns; ``R_b`` the outcome of trajectory b; groups by ``group_ids``;
advantages are 0 outside ``token_mask``), whose shared private helpers (input checks,
outcomes, group statistics, broadcast to tokens) this module reuses. Metrics: the ``adv/``
stats of ``turnrl.algos.advantages``; each estimator documents its extra metrics
(``adv/pass_at_k``, ``adv/frac_no_bootstrap``, ``adv/frac_singleton_steps``) in its docstring.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from turnrl.algos.advantages import (
    _broadcast,
    _check_inputs,
    _group_relative,
    _groups,
    _outcomes,
)
from turnrl.algos.functional import (
    discounted_cumsum,
    last_index,
    masked_mean,
    masked_stats,
    masked_whiten,
    next_sampled_index,
    outcome_rewards,
    place_turn_rewards,
    sampled_turn_index,
)
from turnrl.algos.registry import register_advantage
from turnrl.types import AdvantageInputs, AdvantageOutputs

__all__ = [
    "gigpo",
    "grpo_passk",
    "reinforce_pp_baseline",
    "trloo",
    "turn_gae",
    "turn_grpo",
]


# ----------------------------------------------------------------------------- turn helpers
#
# Turn-level notation: ``r_{b,k} = turn_rewards[b, k]``; the *existing* turns of b are those
# with ``turn_mask[b, k] = 1`` and only they are steps (a turn with ``turn_mask = 0`` is never
# read, never counted, never discounted over). ``G_{b,k} = Σ_{l ≥ k} γ^{l−k} r_{b,l}`` over
# existing turns (``l − k`` counts existing turns). A per-turn advantage ``A_{b,k}`` is given to
# every sampled token with ``turn_index == k``; a sampled token whose turn does not exist
# (a degenerate layout) gets 0 from the per-turn part.


def _turn_rewards(inputs: AdvantageInputs) -> Tensor:
    """``turn_rewards`` (B, K) in a floating dtype."""
    rewards = inputs.turn_rewards
    return rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())


def _check_turn_field(tensor: Tensor, inputs: AdvantageInputs, field: str, name: str) -> None:
    """Raise a ValueError unless the turn-level ``tensor`` has the shape of ``turn_mask``."""
    expected = tuple(inputs.turn_mask.shape)
    if tuple(tensor.shape) != expected:
        raise ValueError(
            f"advantage {name!r}: AdvantageInputs.{field} has shape {tuple(tensor.shape)}, "
            f"expected {expected} (B trajectories, K turns, as turn_mask)"
        )


def _check_gamma(gamma: float, name: str) -> None:
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"advantage {name!r}: gamma must lie in [0, 1], got {gamma}")


def _turn_returns(rewards: Tensor, turn_mask: Tensor, gamma: float) -> Tensor:
    """``G_{b,k} = r_{b,k} + γ · G_{b,k'}`` (``k'`` the next existing turn): ``(B, K)``, 0 on
    turns that do not exist."""
    return discounted_cumsum(rewards, turn_mask, gamma)


def _to_tokens(per_turn: Tensor, inputs: AdvantageInputs) -> Tensor:
    """``(B, K) -> (B, T)``: ``per_turn[b, turn_index[b, t]]`` on sampled tokens of existing
    turns, 0 elsewhere. Raises if a sampled token's turn lies outside ``[0, K)``."""
    mask = inputs.token_mask.bool()
    idx = sampled_turn_index(mask, inputs.turn_index, per_turn.shape[1])
    exists = inputs.turn_mask.bool().gather(1, idx)
    return torch.where(mask & exists, per_turn.gather(1, idx), per_turn.new_zeros(()))


def _scatter_turns(flat: Tensor, selected: Tensor) -> Tensor:
    """Inverse of ``x[selected]`` for a (B, K) bool ``selected``: ``(N,) -> (B, K)``, 0 off it."""
    out = flat.new_zeros(selected.shape)
    return out.masked_scatter(selected, flat)


class _Sets(NamedTuple):
    size: Tensor  # (N,) float, size of the element's set
    mean: Tensor  # (N,) set mean
    std: Tensor  # (N,) Bessel-corrected set std (0 for singletons)
    flat: Tensor  # (N,) bool, all scores of the element's set are equal
    frac_flat: float  # fraction of the n sets whose scores are all equal (empty sets included)


def _sets(scores: Tensor, index: Tensor, n: int) -> _Sets:
    """Statistics of ``scores`` (N,) within the sets ``index`` (N,) long in ``[0, n)``."""
    zeros = scores.new_zeros(n)
    size = zeros.index_add(0, index, torch.ones_like(scores))
    mean = zeros.index_add(0, index, scores) / size.clamp(min=1)
    sq = zeros.index_add(0, index, (scores - mean[index]) ** 2)
    std = (sq / (size - 1).clamp(min=1)).sqrt()
    hi = zeros.scatter_reduce(0, index, scores, reduce="amax", include_self=False)
    lo = zeros.scatter_reduce(0, index, scores, reduce="amin", include_self=False)
    flat = hi == lo
    frac_flat = int(flat.sum()) / n if n else 0.0
    return _Sets(size[index], mean[index], std[index], flat[index], frac_flat)


def _group_index(group_ids: Tensor) -> tuple[Tensor, int]:
    """``(B,)`` arbitrary ids ``->`` (B,) long in ``[0, n_groups)``, ``n_groups``."""
    _, index = torch.unique(group_ids, return_inverse=True)
    return index, int(index.max()) + 1 if index.numel() else 0


# ----------------------------------------------------------------------------- turn-aware


@register_advantage("reinforce_pp_baseline", needs_groups=True)
def reinforce_pp_baseline(inputs: AdvantageInputs, *, gamma: float = 1.0) -> AdvantageOutputs:
    """REINFORCE++-baseline: group-mean baseline, then whitening over the batch's tokens.

    ``G_t`` is ``reinforce_pp``'s token return-to-go (turn k's reward on the last sampled
    token of turn k; ``G_t = r_t + γ G_{t'}`` over the sampled tokens). The baseline is the
    group mean of the outcomes ``R``: ``Ã_t = G_t − mean_{j in g} R_j`` on every sampled
    token of b, then ``A = (Ã − mean) / sqrt(var + 1e-8)`` with the mean and unbiased
    variance over all sampled tokens of the batch. With ``γ = 1`` and an outcome-only reward,
    ``Ã_t = R_b − mean_g R`` (the paper's form). With ``γ < 1`` the baseline is still the
    group mean of the undiscounted outcomes ``R`` subtracted from each token's discounted
    ``G_t`` (OpenRLHF instead subtracts the mean from the reward before discounting, giving
    ``γ^n (R_b − mean_g R)``; the two agree for ``γ = 1``). A singleton group's baseline is
    its own ``R``.

    Shapes: ``advantages`` ``(B, T)``, 0 outside ``token_mask``; ``returns = advantages``;
    ``adv/returns_mean`` is the mean ``G`` before the baseline and whitening.

    Paper: Hu et al. 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large
    Language Models" (arXiv:2501.03262, v2+: REINFORCE++-baseline).
    """
    _check_inputs(inputs, "reinforce_pp_baseline")
    _check_gamma(gamma, "reinforce_pp_baseline")
    rewards = _turn_rewards(inputs)
    mask = inputs.token_mask.bool()
    token_rewards = place_turn_rewards(mask, inputs.turn_index, rewards, inputs.turn_mask)
    returns_to_go = discounted_cumsum(token_rewards, mask, gamma)
    g = _groups(outcome_rewards(rewards, inputs.turn_mask), inputs.group_ids)
    centred = torch.where(mask, returns_to_go - g.mean[:, None], rewards.new_zeros(()))
    advantages = masked_whiten(centred, mask)
    metrics = masked_stats(advantages, mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = g.frac_flat
    metrics["adv/returns_mean"] = float(masked_mean(returns_to_go.detach(), mask))
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


def _ratio_of_binomials(top: Tensor, bottom: Tensor, r: int) -> Tensor:
    """``C(top, r) / C(bottom, r)`` for integer-valued float tensors with ``bottom ≥ r ≥ 0``:
    ``Π_{i<r} max(top − i, 0) / (bottom − i)`` (0 when ``top < r``, 1 when ``r = 0``)."""
    i = torch.arange(r, dtype=top.dtype, device=top.device)
    return ((top[:, None] - i).clamp(min=0) / (bottom[:, None] - i)).prod(dim=1)


@register_advantage("grpo_passk", needs_groups=True)
def grpo_passk(inputs: AdvantageInputs, *, k: int = 4, eps: float = 1e-6) -> AdvantageOutputs:
    """Pass@k training advantage (analytic form), broadcast to sampled tokens.

    Success is binary: trajectory b succeeded iff ``R_b > 0.5`` (rewards in {0, 1}, or any
    reward where more than one half means solved). In a group of ``n`` episodes with ``c``
    successes, draw every k-subset S of the group and score it ``max_{j in S} success_j``
    (pass@k of the subset). Its mean over the ``C(n, k)`` subsets is the group's unbiased
    pass@k, ``ρ = 1 − C(n−c, k) / C(n, k)``, and, the subset score being 0/1, its std is
    ``σ = sqrt(ρ (1 − ρ))``. A subset's normalised advantage is ``(score_S − ρ) / σ``; a
    sample's advantage is the mean over the ``C(n−1, k−1)`` subsets that contain it:

    - a success is in subsets that all score 1: ``A = (1 − ρ) / σ``;
    - a failure is in ``C(n−c−1, k−1)`` all-failure subsets (score 0), the others score 1:
      ``A = (1 − ρ − C(n−c−1, k−1) / C(n−1, k−1)) / σ``.

    Computed as ``A = numerator / (σ + eps)`` (as ``grpo``), ``A = 0`` where ``σ = 0`` (all
    successes, all failures, or ``n − c < k`` so every subset passes). The advantages of a
    group sum to 0; failures get ``−(c/n) · C(n−c−1, k−1) / C(n−1, k−1) / σ``. ``k = 1`` is
    GRPO with the population std: ``(R − p) / sqrt(p (1 − p))``, ``p = c / n``.

    Raises ValueError when a group has fewer than ``k`` episodes. Shapes: ``advantages``
    ``(B, T)``, 0 outside ``token_mask``; ``returns = advantages``. Metric ``adv/pass_at_k``:
    the mean of ρ over the batch's groups.

    Paper: Chen et al. 2025, "Pass@k Training for Adaptively Balancing Exploration and
    Exploitation of Large Reasoning Models" (arXiv:2508.10751), analytic derivation; the
    formulas match the authors' reference code (RUCAIBox/Passk_Training, ``calc_adv`` in
    ``code/passk_adv.py``: the same ρ, σ, positive and negative advantages and ``+1e-6``).
    """
    _check_inputs(inputs, "grpo_passk")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"advantage 'grpo_passk': k must be an integer >= 1, got {k!r}")
    scores = _outcomes(inputs)
    success = (scores > 0.5).to(scores.dtype)
    g = _groups(success, inputs.group_ids)
    n, c = g.size, g.total
    small = n < k
    if bool(small.any()):
        gid = int(inputs.group_ids[small][0])
        raise ValueError(
            f"advantage 'grpo_passk' with k={k}: every group needs at least k episodes, group "
            f"{gid} has {int(n[small][0])}. Lower k or raise train.group_size to >= {k}"
        )
    rho = 1.0 - _ratio_of_binomials(n - c, n, k)
    sigma = (rho * (1.0 - rho)).clamp(min=0).sqrt()
    fail_share = _ratio_of_binomials(n - c - 1, n - 1, k - 1)
    numerator = torch.where(success > 0, 1.0 - rho, 1.0 - rho - fail_share)
    per_traj = torch.where(sigma > 0, numerator / (sigma + eps), scores.new_zeros(()))
    advantages = _broadcast(per_traj, inputs.token_mask)
    metrics = masked_stats(advantages, inputs.token_mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = _groups(scores, inputs.group_ids).frac_flat
    n_groups = int(g.index.max()) + 1 if g.index.numel() else 0
    # ρ is constant within a group: Σ_b ρ_b / n_b sums ρ once per group
    metrics["adv/pass_at_k"] = float((rho / n).sum()) / n_groups if n_groups else 0.0
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


@register_advantage("turn_gae", needs_critic=True)
def turn_gae(inputs: AdvantageInputs, *, gamma: float = 1.0, lam: float = 0.95,
             whiten: bool = False) -> AdvantageOutputs:
    """GAE over the turn-level MDP: one step per existing turn, one advantage per turn.

    ``V_k = turn_values[b, k]`` is the critic's value of the state at the start of turn k
    (before the agent's k-th action). For an existing turn k with next existing turn k':

    - ``δ_k = r_k + γ V_{k'} − V_k``;
    - at the last existing turn ``L`` of b: ``δ_L = r_L + γ V_boot − V_L`` with ``V_boot = 0``
      if ``terminated[b]`` (``done_L = 1``), else ``V_boot = turn_values[b, L + 1]``: the caller
      puts the value of the state after the final observation in the slot after the last
      turn (its ``turn_mask`` is 0, but this one slot is read for truncated rows). When
      ``L = K − 1`` there is no such slot and ``V_boot = 0`` (a truncated episode is then
      treated as terminated; ``adv/frac_no_bootstrap`` counts such rows: widen K by one to
      bootstrap them);
    - ``A_k = Σ_{l ≥ 0} (γλ)^l δ_{k+l}`` over the existing turns (``A_k = δ_k + γλ A_{k'}``);
    - ``returns_k = A_k + V_k`` (the turn critic's targets).

    Every sampled token of turn k gets ``A_k`` and ``returns_k``; ``whiten=True`` then whitens
    the token advantages over the batch's sampled tokens (returns are not). With one turn:
    ``A_0 = r_0 + γ V_boot − V_0`` (``gae`` on a single step); with ``γ = λ = 1`` and
    ``V ≡ 0``, ``A_k = Σ_{l ≥ k} r_l`` (the reward-to-go of turn k).

    Shapes: ``inputs.turn_values`` ``(B, K)`` required; ``advantages``, ``returns`` ``(B, T)``,
    0 outside ``token_mask``. Metrics: ``adv/returns_mean``, ``adv/values_mean`` (mean
    ``V_k`` over sampled tokens), ``adv/frac_no_bootstrap``.

    Papers: Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
    Advantage Estimation" (arXiv:1506.02438), with agent turns as the MDP's steps (as the
    utterance-level critic of Zhou et al. 2024, "ArCHer: Training Language Model Agents via
    Hierarchical Multi-Turn RL", arXiv:2402.19446).
    """
    _check_inputs(inputs, "turn_gae")
    if inputs.turn_values is None:
        raise ValueError(
            "advantage 'turn_gae' needs a turn-level critic: AdvantageInputs.turn_values is "
            "None. Fill turn_values (B, K) with V at the start of each turn, or pick a "
            "critic-free estimator: grpo, rloo, trloo, turn_grpo, gigpo"
        )
    _check_turn_field(inputs.turn_values, inputs, "turn_values", "turn_gae")
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(
            f"advantage 'turn_gae': gamma and lam must lie in [0, 1], got {gamma}, {lam}"
        )
    values = inputs.turn_values
    if not values.is_floating_point():
        values = values.to(torch.get_default_dtype())
    rewards = inputs.turn_rewards.to(values.dtype)
    exists = inputs.turn_mask.bool()
    K = exists.shape[1]
    nxt = next_sampled_index(exists)  # next existing turn, K past the last
    last = last_index(exists)  # (B,), -1 for rows without turns
    has_slot = (last >= 0) & (last + 1 < K)
    slot_value = values.gather(1, (last + 1).clamp(max=K - 1)[:, None]).squeeze(1)
    zero = values.new_zeros(())
    truncated = ~inputs.terminated.bool()
    final = torch.where(has_slot & truncated, slot_value, zero)
    next_values = values.gather(1, nxt.clamp(max=K - 1))
    next_values = torch.where(nxt < K, next_values, final[:, None])
    deltas = torch.where(exists, rewards + gamma * next_values - values, zero)
    per_turn = discounted_cumsum(deltas, exists, gamma * lam)
    per_turn_returns = torch.where(exists, per_turn + values, zero)
    mask = inputs.token_mask.bool()
    advantages = _to_tokens(per_turn, inputs)
    returns = _to_tokens(per_turn_returns, inputs)
    if whiten:
        advantages = masked_whiten(advantages, mask)
    metrics = masked_stats(advantages, mask, "adv/")
    metrics["adv/returns_mean"] = float(masked_mean(returns.detach(), mask))
    metrics["adv/values_mean"] = float(masked_mean(_to_tokens(values.detach(), inputs), mask))
    no_boot = truncated & (last >= 0) & ~has_slot
    metrics["adv/frac_no_bootstrap"] = int(no_boot.sum()) / max(no_boot.numel(), 1)
    return AdvantageOutputs(advantages, returns, metrics)


@register_advantage("trloo", needs_groups=True)
def trloo(inputs: AdvantageInputs, *, gamma: float = 1.0) -> AdvantageOutputs:
    """Turn-level leave-one-out: each turn's return-to-go against the other episodes' at k.

    ``G_{b,k} = Σ_{l ≥ k} γ^{l−k} r_{b,l}``. With ``O_{b,k}`` the other episodes j of b's
    group that reached turn k (``turn_mask[j, k] = 1``):

    - ``|O_{b,k}| > 0``: baseline ``= 1/|O_{b,k}| · Σ_{j in O_{b,k}} G_{j,k}``;
    - ``|O_{b,k}| = 0``: baseline ``= 1/(G−1) · Σ_{j ≠ b, j in g} R_j`` (trajectory-level
      leave-one-out over all other episodes of the group);
    - a singleton group has no other episode: ``A = 0`` (as ``rloo``).

    ``A_{b,k} = G_{b,k} − baseline`` on every sampled token of turn k; ``returns =
    advantages``. With one turn per episode this is ``rloo``.

    Shapes: ``advantages`` ``(B, T)``, 0 outside ``token_mask``.

    Papers: Kool, van Hoof & Welling 2019, "Buy 4 REINFORCE Samples, Get a Baseline for
    Free!" (ICLR workshop), applied per turn; Ahmadian et al. 2024 (arXiv:2402.14740).
    """
    _check_inputs(inputs, "trloo")
    _check_gamma(gamma, "trloo")
    rewards = _turn_rewards(inputs)
    exists = inputs.turn_mask.bool()
    B, K = exists.shape
    to_go = _turn_returns(rewards, exists, gamma)
    scores = outcome_rewards(rewards, exists)
    g = _groups(scores, inputs.group_ids)
    n_groups = int(g.index.max()) + 1 if g.index.numel() else 0
    cell = (g.index[:, None] * K + torch.arange(K, device=exists.device)).flatten()
    zeros = rewards.new_zeros(n_groups * K)
    cell_sum = zeros.index_add(0, cell, to_go.flatten()).view(-1)[cell].view(B, K)
    cell_count = zeros.index_add(0, cell, exists.to(rewards.dtype).flatten())[cell].view(B, K)
    others = cell_count - 1
    turn_baseline = (cell_sum - to_go) / others.clamp(min=1)
    episode_baseline = (g.total - scores) / (g.size - 1).clamp(min=1)
    baseline = torch.where(others > 0, turn_baseline, episode_baseline[:, None])
    keep = exists & (g.size > 1)[:, None]
    per_turn = torch.where(keep, to_go - baseline, rewards.new_zeros(()))
    advantages = _to_tokens(per_turn, inputs)
    metrics = masked_stats(advantages, inputs.token_mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = g.frac_flat
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


@register_advantage("turn_grpo", needs_groups=True)
def turn_grpo(
    inputs: AdvantageInputs, *, gamma: float = 1.0, eps: float = 1e-6
) -> AdvantageOutputs:
    """GRPO over turns: each turn's return-to-go normalised over all turns of its group.

    ``G_{b,k} = Σ_{l ≥ k} γ^{l−k} r_{b,l}``; with ``S_g = {(j, l) : j in g, turn_mask[j, l] = 1}``
    (every existing turn of every episode of the group), ``A_{b,k} = (G_{b,k} − mean_{S_g} G)
    / (std_{S_g} G + eps)``, std Bessel-corrected; a group whose turn returns are all equal
    (one turn in all, say) gets exactly 0. ``A_{b,k}`` goes to every sampled token of turn k;
    ``returns = advantages``. With ``γ = 1`` and an outcome-only reward on the last turn,
    ``G_{b,k} = R_b`` and turns weigh the group statistics by episode length.

    Shapes: ``advantages`` ``(B, T)``, 0 outside ``token_mask``. Metric
    ``adv/frac_zero_std_groups``: fraction of groups whose turn returns are all equal.

    Paper: Shao et al. 2024, "DeepSeekMath" (arXiv:2402.03300), GRPO's process-supervision
    variant (normalise every step's reward over the group, advantage = normalised
    reward-to-go), here normalising the returns-to-go of the turns.
    """
    _check_inputs(inputs, "turn_grpo")
    _check_gamma(gamma, "turn_grpo")
    rewards = _turn_rewards(inputs)
    exists = inputs.turn_mask.bool()
    to_go = _turn_returns(rewards, exists, gamma)
    group, n_groups = _group_index(inputs.group_ids)
    scores = to_go[exists]
    s = _sets(scores, group[:, None].expand_as(exists)[exists], n_groups)
    normed = (scores - s.mean) / (s.std + eps)
    per_turn = _scatter_turns(torch.where(s.flat, scores.new_zeros(()), normed), exists)
    advantages = _to_tokens(per_turn, inputs)
    metrics = masked_stats(advantages, inputs.token_mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = s.frac_flat
    return AdvantageOutputs(advantages, advantages.clone(), metrics)


@register_advantage("gigpo", needs_groups=True)
def gigpo(
    inputs: AdvantageInputs,
    *,
    omega: float = 1.0,
    gamma: float = 1.0,
    norm_std: bool = True,
    eps: float = 1e-6,
) -> AdvantageOutputs:
    """Group-in-group: episode-level GRPO plus a step-level advantage among identical states.

    ``A_{b,k} = A^E_b + ω · A^S_{b,k}``:

    - ``A^E_b`` is ``grpo(norm_std, eps)``'s advantage of b (outcome ``R_b`` against its
      group), given to every sampled token of b;
    - ``A^S``: the anchor-state set of (b, k) is ``{(j, l) : j in b's group, turn_mask[j, l] = 1,
      state_keys[j, l] = state_keys[b, k]}`` (any turn index: the same state reached at
      different turns shares a set, as do repeated visits within one episode). With
      ``G_{b,k} = Σ_{l ≥ k} γ^{l−k} r_{b,l}``, ``A^S_{b,k} = G_{b,k} − mean_set G``, divided by
      ``std_set G + eps`` (Bessel) when ``norm_std``; a singleton set, or a set whose returns
      are all equal, gets exactly 0. Turn k's sampled tokens get ``ω · A^S_{b,k}``.

    With all state keys distinct within each group, ``gigpo`` equals ``grpo``. ``returns =
    advantages``. Raises ValueError when ``state_keys`` is None.

    Shapes: ``inputs.state_keys`` ``(B, K)`` long, required; ``advantages`` ``(B, T)``, 0
    outside ``token_mask``. Metrics: ``adv/frac_zero_std_groups`` (episode groups),
    ``adv/frac_singleton_steps`` (fraction of existing turns whose state set is a singleton:
    no step-level signal).

    Paper: Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training"
    (arXiv:2505.10978).
    """
    _check_inputs(inputs, "gigpo")
    if inputs.state_keys is None:
        raise ValueError(
            "advantage 'gigpo' needs state keys: AdvantageInputs.state_keys is None. The env "
            "must declare has_state_key (implement state_key() -> Hashable), or pick grpo"
        )
    _check_turn_field(inputs.state_keys, inputs, "state_keys", "gigpo")
    _check_gamma(gamma, "gigpo")
    rewards = _turn_rewards(inputs)
    exists = inputs.turn_mask.bool()
    scores = outcome_rewards(rewards, exists)
    g = _groups(scores, inputs.group_ids)
    episode = _group_relative(scores, g, norm_std=norm_std, eps=eps)
    to_go = _turn_returns(rewards, exists, gamma)
    turn_scores = to_go[exists]
    pairs = torch.stack(
        [g.index[:, None].expand_as(exists)[exists], inputs.state_keys.long()[exists]], dim=1
    )
    _, state_set = torch.unique(pairs, dim=0, return_inverse=True)
    n_sets = int(state_set.max()) + 1 if state_set.numel() else 0
    s = _sets(turn_scores, state_set, n_sets)
    step = turn_scores - s.mean
    if norm_std:
        step = step / (s.std + eps)
    step = torch.where((s.size > 1) & ~s.flat, step, turn_scores.new_zeros(()))
    per_turn_step = _scatter_turns(step, exists)
    advantages = _broadcast(episode, inputs.token_mask) + omega * _to_tokens(per_turn_step, inputs)
    metrics = masked_stats(advantages, inputs.token_mask, "adv/")
    metrics["adv/frac_zero_std_groups"] = g.frac_flat
    singletons = s.size == 1
    metrics["adv/frac_singleton_steps"] = int(singletons.sum()) / max(singletons.numel(), 1)
    return AdvantageOutputs(advantages, advantages.clone(), metrics)
