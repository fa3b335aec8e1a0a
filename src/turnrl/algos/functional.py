"""Masked tensor helpers shared by the estimators and losses (pure functions).

Shapes: ``B`` trajectories, ``T`` tokens, ``K`` agent turns. A ``mask`` is any tensor whose
nonzero entries mark the positions that count (float 0/1 or bool). Masked-out entries are
never read arithmetically (``torch.where``, not ``x * mask``), so they may hold anything,
even ``inf`` or ``nan``, without changing a result or producing ``nan`` gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _zero_outside(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask.bool(), x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ x·m over all entries (``dim=None``) or along ``dim``."""
    z = _zero_outside(x, mask)
    return z.sum() if dim is None else z.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ x·m / Σ m (over all entries or along ``dim``); 0 where no entry is masked in."""
    m = mask.bool()
    count = m.sum() if dim is None else m.sum(dim)
    return masked_sum(x, m, dim) / count.clamp(min=1).to(x.dtype)


def masked_var(x: Tensor, mask: Tensor, *, unbiased: bool = True) -> Tensor:
    """Variance of the masked-in entries of ``x`` (a scalar).

    ``Σ m (x − x̄)² / (n − 1)`` when ``unbiased`` (Bessel), else ``/ n``; ``n = Σ m``.
    With ``n ≤ 1`` the result is 0.
    """
    m = mask.bool()
    n = m.sum()
    mean = masked_mean(x, m)
    sq = masked_sum((x - mean) ** 2, m)
    denom = (n - 1) if unbiased else n
    return sq / denom.clamp(min=1).to(x.dtype)


def masked_whiten(x: Tensor, mask: Tensor, *, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """``(x − mean) / sqrt(var + eps)`` over the masked-in entries (var unbiased), 0 elsewhere.

    As verl's ``masked_whiten``; ``shift_mean=False`` adds the mean back after scaling.
    """
    m = mask.bool()
    mean = masked_mean(x, m)
    var = masked_var(x, m, unbiased=True)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return _zero_outside(out, m)


def masked_stats(x: Tensor, mask: Tensor, prefix: str) -> dict[str, float]:
    """Metrics ``{prefix}mean, {prefix}std, {prefix}min, {prefix}max`` over the masked-in
    entries (std unbiased); all 0.0 when nothing is masked in."""
    with torch.no_grad():
        m = mask.bool()
        if not bool(m.any()):
            return {f"{prefix}{k}": 0.0 for k in ("mean", "std", "min", "max")}
        picked = x.detach()[m]
        return {
            f"{prefix}mean": float(picked.mean()),
            f"{prefix}std": float(masked_var(x.detach(), m).sqrt()),
            f"{prefix}min": float(picked.min()),
            f"{prefix}max": float(picked.max()),
        }


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of ``softmax(logits)`` over the last dim: ``(B, T, V) -> (B, T)``.

    ``H = −Σ_v p_v log p_v`` with ``log p = logits − logsumexp(logits)`` (``log_softmax``),
    stable for large logits; ``−inf`` logits (banned tokens) contribute 0.
    """
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    # where() on logp itself, not on p * logp: 0 * -inf would leak nan into the gradient
    finite_logp = torch.where(p > 0, logp, torch.zeros((), dtype=logp.dtype, device=logp.device))
    return -(p * finite_logp).sum(-1)


def outcome_rewards(turn_rewards: Tensor, turn_mask: Tensor) -> Tensor:
    """``R_b = Σ_k turn_rewards[b, k] · turn_mask[b, k]``: ``(B, K) -> (B,)``."""
    return masked_sum(turn_rewards, turn_mask, dim=1)


def next_sampled_index(token_mask: Tensor) -> Tensor:
    """``(B, T) -> (B, T)`` long: the position of the next sampled token strictly after ``t``
    in the same row, or ``T`` when there is none."""
    m = token_mask.bool()
    _, T = m.shape
    pos = torch.arange(T, device=m.device).expand_as(m)
    cand = torch.where(m, pos, T)
    shifted = torch.cat([cand[:, 1:], torch.full_like(cand[:, :1], T)], dim=1)
    return shifted.flip(1).cummin(1).values.flip(1)


def last_index(mask: Tensor) -> Tensor:
    """``(B, T) -> (B,)`` long: the last position where ``mask`` is nonzero, -1 if none."""
    m = mask.bool()
    pos = torch.arange(m.shape[1], device=m.device).expand_as(m)
    return torch.where(m, pos, -1).amax(dim=1)


def sampled_turn_index(token_mask: Tensor, turn_index: Tensor, num_turns: int) -> Tensor:
    """``(B, T) -> (B, T)`` long: ``turn_index`` on sampled tokens, 0 elsewhere.

    Raises a ValueError when a sampled token's turn lies outside ``[0, num_turns)``
    (``num_turns`` is K, ``turn_rewards.shape[1]``); tokens outside ``token_mask`` are never
    read, so they may hold any turn index.
    """
    m = token_mask.bool()
    K = num_turns
    idx = torch.where(m, turn_index.long(), 0)
    if bool(m.any()) and (int(idx[m].min()) < 0 or int(idx[m].max()) >= K):
        raise ValueError(
            f"turn_index on sampled tokens must lie in [0, {K}) (K = turn_rewards.shape[1]), "
            f"got values in [{int(idx[m].min())}, {int(idx[m].max())}]"
        )
    return idx


def place_turn_rewards(
    token_mask: Tensor, turn_index: Tensor, turn_rewards: Tensor, turn_mask: Tensor
) -> Tensor:
    """Put each turn's reward on the last sampled token of that turn: ``-> (B, T)``.

    ``r[b, t] = Σ_k turn_rewards[b, k] · turn_mask[b, k] · [t = last_k]`` where
    ``last_k = max{t : turn_index[b, t] = k, token_mask[b, t] = 1}``. A turn with no sampled
    token (a degenerate layout) credits the last sampled token of an earlier turn; a reward
    with no sampled token at or before its turn is dropped. Tokens outside ``token_mask`` are
    never read.
    """
    m = token_mask.bool()
    B, T = m.shape
    K = turn_rewards.shape[1]
    idx = sampled_turn_index(m, turn_index, K)
    pos = torch.arange(T, device=m.device).expand(B, T)
    src = torch.where(m, pos, -1)
    last = torch.full((B, K), -1, dtype=torch.long, device=m.device)
    last = last.scatter_reduce(1, idx, src, reduce="amax", include_self=True)
    last = last.cummax(dim=1).values  # turns without sampled tokens fall back to earlier ones
    rewards = _zero_outside(turn_rewards, turn_mask)
    rewards = _zero_outside(rewards, last >= 0)
    out = torch.zeros((B, T), dtype=turn_rewards.dtype, device=turn_rewards.device)
    return out.scatter_add(1, last.clamp(min=0), rewards)


def discounted_cumsum(x: Tensor, mask: Tensor, discount: float) -> Tensor:
    """Discounted sum to go over the masked-in positions of each row: ``(B, T) -> (B, T)``.

    ``y_t = x_t + discount · y_{t'}`` with ``t'`` the next masked-in position after ``t``
    (masked-out positions are skipped, not counted as steps); 0 outside ``mask``.
    """
    m = mask.bool()
    x = _zero_outside(x, m)
    if discount == 1.0:
        out = x.flip(1).cumsum(1).flip(1)
    else:
        running = torch.zeros_like(x[:, 0])
        steps: list[Tensor] = []
        for t in range(x.shape[1] - 1, -1, -1):
            running = torch.where(m[:, t], x[:, t] + discount * running, running)
            steps.append(running)
        out = torch.stack(steps[::-1], dim=1) if steps else x
    return _zero_outside(out, m)


def state_values(values: Tensor) -> Tensor:
    """Critic outputs (B, T) → the value of the state in which each token was sampled.

    ``values[b, t]`` is V after reading ``tokens[: t + 1]``, so token t was sampled in the
    state valued ``V_t = values[b, t − 1]``. Position 0 has no preceding state;
    ``values[b, 0]`` stands in for it (no token is sampled there: a prompt comes first).
    The one place this shift is written: GAE, the value loss and the turn-level critic's
    turn-start values all read it.
    """
    return torch.cat([values[:, :1], values[:, :-1]], dim=1)
