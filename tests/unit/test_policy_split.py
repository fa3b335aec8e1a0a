"""Separate policies (``multi.policies``): each policy gets exactly its own episodes, and
adapters on one base hold its frozen weights once."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from turnrl.models.policy import share_frozen_weights
from turnrl.train.collect import Collected
from turnrl.train.policies import split_policies
from turnrl.train.scoring import EpisodeScore
from turnrl.types import Trajectory


def episode(policy: str | None, reward: float, group: int) -> Trajectory:
    return Trajectory(env_id="e", seed=0, group_id=group, messages=[], turn_rewards=[reward],
                      success=reward > 0, policy=policy, agent="a")


def collected(episodes: list[Trajectory]) -> Collected:
    return Collected(episodes, [EpisodeScore() for _ in episodes],
                     torch.tensor([t.total_reward for t in episodes]), {"rollout/success": 0.5})


def test_each_policy_gets_exactly_its_own_episodes_in_order() -> None:
    episodes = [episode("main", 1.0, 0), episode("b", 0.0, 1), episode(None, 0.0, 2),
                episode("b", 1.0, 3), episode("c", 1.0, 5)]
    main, separate = split_policies(collected(episodes), ["b", "c"])
    assert [t.group_id for t in main.trajectories] == [0, 2]  # None is main
    assert main.outcomes.tolist() == [1.0, 0.0] and len(main.scores) == 2
    assert main.metrics == {"rollout/success": 0.5}  # the step's, over every episode
    assert [t.group_id for t in separate["b"].trajectories] == [1, 3]
    assert separate["b"].outcomes.tolist() == [0.0, 1.0]
    assert separate["b"].metrics == {"rollout/reward": 0.5, "rollout/success": 0.5}
    assert [t.group_id for t in separate["c"].trajectories] == [5]
    everything = collected(episodes)
    assert split_policies(everything, [])[0] is everything  # no policies: as it was


def test_a_policy_with_no_episodes_gets_an_empty_part() -> None:
    _, separate = split_policies(collected([episode("main", 1.0, 0)]), ["b"])
    assert not separate["b"] and separate["b"].metrics == {}


def test_an_episode_of_an_unknown_policy_is_an_error() -> None:
    with pytest.raises(ValueError, match="sampled by 'z', which is not a trained policy"):
        split_policies(collected([episode("z", 1.0, 0)]), ["b"])


class Adapted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.base = nn.Linear(4, 4).requires_grad_(False)
        self.adapter = nn.Linear(4, 4)


def test_frozen_weights_are_shared_and_trained_ones_are_not() -> None:
    a, b = Adapted(), Adapted()
    assert share_frozen_weights(a, b) == 2  # the base's weight and bias
    assert b.base.weight.data_ptr() == a.base.weight.data_ptr()
    assert b.adapter.weight.data_ptr() != a.adapter.weight.data_ptr()
    with torch.no_grad():
        b.adapter.weight.add_(1.0)  # training one adapter leaves the other as it was
    assert not torch.equal(a.adapter.weight, b.adapter.weight)
    c = Adapted()
    with torch.no_grad():
        c.base.weight.add_(1.0)  # a different base is never shared
    assert share_frozen_weights(a, c) == 1  # only the equal bias
    assert c.base.weight.data_ptr() != a.base.weight.data_ptr()
