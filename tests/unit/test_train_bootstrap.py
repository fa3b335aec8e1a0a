"""``algo.bootstrap_truncated``: whether critic estimators bootstrap a truncated episode."""

from __future__ import annotations

import dataclasses

import torch
from algo_inputs import make_inputs

from turnrl.algos import ADVANTAGES
from turnrl.algos.presets import PRESETS
from turnrl.train.loop import estimator_inputs


def test_truncated_episodes_end_with_value_zero_unless_bootstrapping() -> None:
    # one truncated episode of two sampled tokens, reward 0, critic values 0.5 everywhere
    inputs = make_inputs(token_mask=[[0, 1, 1]], turn_index=[[-1, 0, 0]],
                         turn_rewards=[[0.0]], terminated=[False],
                         values=[[0.5, 0.5, 0.5]], attention_mask=[[1, 1, 1]])
    kwargs = {"gamma": 1.0, "lam": 1.0, "whiten": False}
    ppo = PRESETS["ppo"]
    assert not ppo.bootstrap_truncated  # the default
    ended = ADVANTAGES["gae"](estimator_inputs(inputs, ppo), **kwargs)
    booted = ADVANTAGES["gae"](
        estimator_inputs(inputs, dataclasses.replace(ppo, bootstrap_truncated=True)), **kwargs)
    # without bootstrap: return 0, so A = 0 − V = −0.5 on both tokens
    assert torch.allclose(ended.returns[0, 1:], torch.zeros(2, dtype=torch.float64))
    assert torch.allclose(ended.advantages[0, 1:], torch.full((2,), -0.5, dtype=torch.float64))
    # with it: the last state is worth V = 0.5, so the stalled episode is paid 0.5
    assert torch.allclose(booted.returns[0, 1:], torch.full((2,), 0.5, dtype=torch.float64))
    assert inputs.terminated.tolist() == [False]  # the batch's own flags are left alone
