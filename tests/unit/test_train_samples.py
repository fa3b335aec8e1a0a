"""Which groups samples/ keeps (train.save_samples, train.sample_which)."""

from __future__ import annotations

import torch

from turnrl.train.samples import sample_rows
from turnrl.types import Trajectory

# four groups of two episodes; mean returns: group 0 → 0.5, 1 → 1.0, 2 → 0.0, 3 → 0.75
RETURNS = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.5]]
EPISODES = [Trajectory(env_id="e", seed=g, group_id=g, messages=[])
            for g, pair in enumerate(RETURNS) for _ in pair]
TURN_REWARDS = torch.tensor([[r] for pair in RETURNS for r in pair])


def rows(n: int, which: str, seed: int = 0) -> list[int]:
    return sample_rows(EPISODES, TURN_REWARDS, n, which, seed)


def test_whole_groups_are_kept_in_batch_order():
    assert rows(0, "first") == []
    assert rows(2, "first") == [0, 1]
    assert rows(3, "first") == [0, 1, 2, 3]  # rounded up to whole groups
    assert rows(100, "first") == list(range(8))


def test_best_worst_and_extremes_rank_groups_by_mean_return():
    assert rows(2, "best") == [2, 3]  # group 1
    assert rows(4, "best") == [2, 3, 6, 7]  # groups 1 and 3
    assert rows(2, "worst") == [4, 5]  # group 2
    assert rows(4, "extremes") == [2, 3, 4, 5]  # the best and the worst
    assert rows(6, "extremes") == [2, 3, 4, 5, 6, 7]  # then the next best


def test_random_groups_follow_the_seed():
    picks = {tuple(rows(4, "random", seed)) for seed in range(20)}
    assert len(picks) > 2  # different groups for different seeds
    assert rows(4, "random", 7) == rows(4, "random", 7)
    assert all(len(p) == 4 and p[0] % 2 == 0 and p[1] == p[0] + 1 for p in picks)
