"""Loss aggregations: a per-token loss ``(B, T)`` and its ``token_mask`` ``(B, T)`` -> scalar.

Notation: ``l`` the per-token loss, ``m`` the mask, ``n_b = Σ_t m[b, t]``.

``total_tokens`` / ``total_seqs`` are GLOBAL normalisers: when a batch is split into
micro-batches, pass the whole batch's counts (``Σ m`` and the number of rows with
``n_b > 0``) to every call and the sum of the micro-batch losses equals the full-batch loss
exactly (gradient accumulation without reweighting). When None, this call's own counts are
used. Normalisers are raised to at least 1, so a batch without sampled tokens gives 0.
``norm_len`` is only read by ``seq_mean_token_sum_norm``; every aggregation accepts it so
the learner can pass the same keywords to any of them.

Reference: verl's ``agg_loss`` (``core_algos.py``); the choice matters (Liu et al. 2025,
Dr. GRPO, arXiv:2503.20783; Yu et al. 2025, DAPO, arXiv:2503.14476).
"""

from __future__ import annotations

from torch import Tensor

from turnrl.algos.functional import masked_sum
from turnrl.algos.registry import register_aggregation

__all__ = ["seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm", "token_mean"]


def _normalise(value: Tensor, total: float | None, own: Tensor) -> Tensor:
    if total is None:
        return value / own.clamp(min=1).to(value.dtype)
    return value / max(float(total), 1.0)


def _row_sums(per_token: Tensor, token_mask: Tensor) -> tuple[Tensor, Tensor]:
    """``(Σ_t l·m, n_b)`` per row, both ``(B,)``."""
    return masked_sum(per_token, token_mask, dim=1), token_mask.bool().sum(1)


@register_aggregation("token_mean")
def token_mean(
    per_token: Tensor,
    token_mask: Tensor,
    *,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    norm_len: float | None = None,
) -> Tensor:
    """``Σ_{b,t} l·m / total_tokens`` (default ``Σ m``): every sampled token weighs the same.

    DAPO's token-level loss (Yu et al. 2025, arXiv:2503.14476); PPO's usual mean.
    """
    return _normalise(masked_sum(per_token, token_mask), total_tokens, token_mask.bool().sum())


@register_aggregation("seq_mean_token_mean")
def seq_mean_token_mean(
    per_token: Tensor,
    token_mask: Tensor,
    *,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    norm_len: float | None = None,
) -> Tensor:
    """``(1/total_seqs) Σ_b (Σ_t l·m / n_b)``: the mean over trajectories of each one's
    token mean (rows with ``n_b = 0`` contribute 0; default ``total_seqs`` = rows with
    ``n_b > 0``). GRPO's original aggregation (Shao et al. 2024, arXiv:2402.03300)."""
    sums, counts = _row_sums(per_token, token_mask)
    per_seq = sums / counts.clamp(min=1).to(sums.dtype)
    return _normalise(per_seq.sum(), total_seqs, (counts > 0).sum())


@register_aggregation("seq_mean_token_sum")
def seq_mean_token_sum(
    per_token: Tensor,
    token_mask: Tensor,
    *,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    norm_len: float | None = None,
) -> Tensor:
    """``(1/total_seqs) Σ_b Σ_t l·m``: the mean over trajectories of each one's token sum."""
    sums, counts = _row_sums(per_token, token_mask)
    return _normalise(sums.sum(), total_seqs, (counts > 0).sum())


@register_aggregation("seq_mean_token_sum_norm")
def seq_mean_token_sum_norm(
    per_token: Tensor,
    token_mask: Tensor,
    *,
    total_tokens: float | None = None,
    total_seqs: float | None = None,
    norm_len: float | None = None,
) -> Tensor:
    """``(1/total_seqs) Σ_b Σ_t l·m / norm_len``, ``norm_len`` a constant (e.g. the maximum
    generation length), required. Removes GRPO's length bias (Dr. GRPO, Liu et al. 2025,
    "Understanding R1-Zero-Like Training", arXiv:2503.20783)."""
    if norm_len is None or norm_len <= 0:
        raise ValueError(
            "loss aggregation 'seq_mean_token_sum_norm' needs norm_len > 0 (a constant such "
            f"as the maximum number of generated tokens per trajectory), got {norm_len}"
        )
    sums, counts = _row_sums(per_token, token_mask)
    return _normalise(sums.sum() / float(norm_len), total_seqs, (counts > 0).sum())
