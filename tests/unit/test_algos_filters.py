"""DAPO filters: dynamic sampling's group test, per-turn lengths, soft overlong penalty."""

from __future__ import annotations

import pytest
import torch

from turnrl.algos.filters import informative_groups, overlong_penalty, turn_lengths


def test_informative_groups_keeps_only_groups_with_reward_spread() -> None:
    # group 7: {1, 0} spread -> kept; group 3: {1, 1} all equal -> dropped; group 9 singleton
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.5])
    groups = torch.tensor([7, 7, 3, 3, 9])
    assert informative_groups(rewards, groups).tolist() == [True, True, False, False, False]


def test_informative_groups_ignores_the_order_and_labels_of_groups() -> None:
    rewards = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    groups = torch.tensor([5, 1, 5, 1, 5, 1])
    keep = informative_groups(rewards, groups)
    perm = torch.tensor([3, 0, 5, 2, 1, 4])
    assert torch.equal(informative_groups(rewards[perm], groups[perm] * 100 + 3), keep[perm])
    assert keep.tolist() == [True, False, True, False, True, False]


def test_turn_lengths_count_sampled_tokens_per_turn() -> None:
    # row 0: prompt (-1), turn 0 samples 2 tokens, observation, turn 1 samples 3
    token_mask = torch.tensor([[0, 1, 1, 0, 1, 1, 1], [0, 1, 0, 0, 0, 0, 0]]).float()
    turn_index = torch.tensor([[-1, 0, 0, 0, 1, 1, 1], [-1, 0, 0, -1, -1, -1, -1]])
    assert turn_lengths(token_mask, turn_index, 3).tolist() == [[2, 3, 0], [1, 0, 0]]


def test_overlong_penalty_reference_values() -> None:
    # L = 16, c = 4: no penalty up to 12; (12 − |y|)/4 on (12, 16]; −1 beyond 16
    lengths = torch.tensor([[10.0, 12.0, 13.0, 16.0, 17.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    penalty = overlong_penalty(lengths, mask, max_len=16, cache=4)
    assert penalty.tolist() == [[0.0, 0.0, -0.25, -1.0, 0.0]]  # last turn does not exist
    assert overlong_penalty(lengths, torch.ones_like(mask), max_len=16, cache=4)[0, 4] == -1.0


def test_overlong_penalty_rejects_a_cache_outside_the_limit() -> None:
    with pytest.raises(ValueError, match="cache=0"):
        overlong_penalty(torch.ones(1, 1), torch.ones(1, 1), max_len=16, cache=0)


def test_turn_sums_add_up_sampled_values_per_turn() -> None:
    # row 0: turn 0 samples values 1, 2 (sum 3); the observation's 10 is not sampled;
    # turn 1 samples 4 (sum 4); padding (-1, unsampled) adds nothing
    values = torch.tensor([[9.0, 1.0, 2.0, 10.0, 4.0, 7.0]])
    token_mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0, 0.0]])
    turn_index = torch.tensor([[-1, 0, 0, 0, 1, -1]])
    from turnrl.algos.filters import turn_sums

    assert turn_sums(values, token_mask, turn_index, 3).tolist() == [[3.0, 4.0, 0.0]]
