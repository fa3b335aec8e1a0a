"""Bias of group baselines, checked numerically on a 3-armed bandit (fixed seed).

Policy π = softmax(θ); reward r(a) deterministic. Each group samples G arms; the estimator
gives advantages A_i and the gradient estimate is mean_i A_i ∇θ log π(a_i), with
∇θ log π(a) = e_a − π. The exact policy gradient is Σ_a π(a) (r(a) − J) (e_a − π).
RLOO's leave-one-out baseline is independent of the sample it scores, so the estimate is
unbiased. GRPO's mean baseline includes the sample itself: A_i = (G−1)/G · (r_i − mean_{j≠i}),
so its expectation is the exact gradient shrunk by (G−1)/G.
"""

from __future__ import annotations

import torch

from turnrl.algos import ADVANTAGES
from turnrl.types import AdvantageInputs

THETA = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
REWARD = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
G, GROUPS = 4, 100_000


def exact_gradient() -> torch.Tensor:
    pi = torch.softmax(THETA, 0)
    value = (pi * REWARD).sum()
    return ((pi * (REWARD - value))[:, None] * (torch.eye(3, dtype=torch.float64) - pi)).sum(0)


def estimated_gradient(advantage: str, **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Monte-Carlo mean of the per-group gradient estimates and its standard error."""
    generator = torch.Generator().manual_seed(0)
    pi = torch.softmax(THETA, 0)
    arms = torch.multinomial(pi.expand(GROUPS * G, 3), 1, generator=generator)[:, 0]
    inputs = AdvantageInputs(  # one sampled token per episode, its reward on turn 0
        token_mask=torch.ones(GROUPS * G, 1, dtype=torch.float64),
        turn_index=torch.zeros(GROUPS * G, 1, dtype=torch.long),
        turn_rewards=REWARD[arms][:, None],
        turn_mask=torch.ones(GROUPS * G, 1, dtype=torch.float64),
        group_ids=torch.arange(GROUPS).repeat_interleave(G),
        terminated=torch.ones(GROUPS * G, dtype=torch.bool),
    )
    adv = ADVANTAGES[advantage](inputs, **kwargs).advantages[:, 0]
    score = torch.nn.functional.one_hot(arms, 3).double() - pi  # ∇θ log π(a)
    per_group = (adv[:, None] * score).view(GROUPS, G, 3).mean(1)
    return per_group.mean(0), per_group.std(0) / GROUPS**0.5


def test_rloo_is_unbiased() -> None:
    mean, stderr = estimated_gradient("rloo")
    assert torch.all((mean - exact_gradient()).abs() < 5 * stderr), (mean, exact_gradient())


def test_grpo_mean_baseline_shrinks_the_gradient_by_g_minus_1_over_g() -> None:
    mean, stderr = estimated_gradient("grpo", norm_std=False)
    shrunk = exact_gradient() * (G - 1) / G
    assert torch.all((mean - shrunk).abs() < 5 * stderr), (mean, shrunk)
    # and the shrinkage is detectable: the unshrunk gradient is far outside the error bars
    assert torch.any((mean - exact_gradient()).abs() > 5 * stderr)
