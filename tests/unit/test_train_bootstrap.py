"""``algo.bootstrap_truncated``: whether critic estimators bootstrap a truncated episode."""

from __future__ import annotations

import dataclasses

import torch

from turnrl.algos import ADVANTAGES
from turnrl.algos.presets import PRESETS
from turnrl.train.layout import layout
from turnrl.train.scoring import ScoredBatch
from turnrl.train.stages import Passes, advantage_inputs
from turnrl.types import Trajectory


def test_truncated_episodes_end_with_value_zero_unless_bootstrapping() -> None:
    # one truncated episode of two sampled tokens, reward 0, critic values 0.5 everywhere
    episode = Trajectory(env_id="x-v0", seed=0, group_id=0, messages=[], token_ids=[7, 8, 9],
                         loss_mask=[0, 1, 1], logprobs=[0.0, -0.5, -0.5],
                         turn_index=[-1, 0, 0], turn_rewards=[0.0], terminated=False,
                         truncated=True)
    tokens = layout([episode], 0, bootstrap_truncated=True)
    assert tokens.attention_mask.tolist() == [[1.0, 1.0, 1.0]]
    scored = ScoredBatch(tokens, tokens.env_rewards, {})
    passes = Passes(values=torch.full((1, 3), 0.5))
    kwargs = {"gamma": 1.0, "lam": 1.0, "whiten": False}
    ppo = PRESETS["ppo"]
    assert not ppo.bootstrap_truncated  # the default
    ended_inputs = advantage_inputs(scored, passes, ppo)
    assert ended_inputs.terminated.tolist() == [True]  # counted as terminated
    ended = ADVANTAGES["gae"](ended_inputs, **kwargs)
    booted_inputs = advantage_inputs(scored, passes,
                                     dataclasses.replace(ppo, bootstrap_truncated=True))
    assert booted_inputs.terminated.tolist() == [False]
    booted = ADVANTAGES["gae"](booted_inputs, **kwargs)
    # without bootstrap: return 0, so A = 0 − V = −0.5 on both tokens
    assert torch.allclose(ended.returns[0, 1:], torch.zeros(2))
    assert torch.allclose(ended.advantages[0, 1:], torch.full((2,), -0.5))
    # with it: the last state is worth V = 0.5, so the stalled episode is paid 0.5
    assert torch.allclose(booted.returns[0, 1:], torch.full((2,), 0.5))
    assert tokens.terminated.tolist() == [False]  # the batch's own flags are left alone
