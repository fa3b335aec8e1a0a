"""The FSDP pieces that need no process group: lockstep passes, gradient clipping over
replicated parameters, and the config checks (the sharded path runs in
tests/smoke/test_ray_backend.py: 1 vs 2 FSDP learners)."""

from __future__ import annotations

import re

import pytest
import torch

from turnrl.config import ConfigError, load_config
from turnrl.config.checks import check_distributed, validate
from turnrl.distributed.data_parallel import DataParallel
from turnrl.distributed.fsdp import clip_grad_norm, is_sharded


def group(rank: int, world_size: int, lockstep: bool) -> DataParallel:
    dp = DataParallel.__new__(DataParallel)  # no process group: shard() is pure
    dp.rank, dp.world_size, dp.lockstep = rank, world_size, lockstep
    return dp


@pytest.mark.parametrize("n_passes, world_size", [(5, 2), (1, 2), (4, 2), (7, 3)])
def test_lockstep_gives_every_rank_the_same_number_of_passes(n_passes: int,
                                                             world_size: int) -> None:
    passes = list(range(n_passes))
    shares = [group(r, world_size, lockstep=True).shard(passes) for r in range(world_size)]
    assert len({len(share) for share in shares}) == 1  # FSDP's collectives line up
    assert len(shares[0]) == -(-n_passes // world_size)
    real = sorted(p for share in shares for p in share if p is not None)
    assert real == passes  # every pass runs once; the rest are fillers
    replicas = [group(r, world_size, lockstep=False).shard(passes) for r in range(world_size)]
    assert [[p for p in s if p is not None] for s in shares] == replicas
    assert all(None not in s for s in replicas)  # ddp: no fillers


def test_clip_grad_norm_of_replicated_parameters_is_torchs() -> None:
    torch.manual_seed(0)
    a = [torch.nn.Parameter(torch.randn(3, 4)) for _ in range(3)]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    for x, y in zip(a, b, strict=True):
        x.grad = torch.randn_like(x) * 3
        y.grad = x.grad.clone()
    a.append(torch.nn.Parameter(torch.zeros(2)))  # no gradient: ignored by both
    want = float(torch.nn.utils.clip_grad_norm_(b, 1.0))
    assert clip_grad_norm(a, 1.0) == pytest.approx(want)
    for x, y in zip(a, b, strict=False):
        torch.testing.assert_close(x.grad, y.grad)
    assert not any(is_sharded(p) for p in a)


@pytest.mark.parametrize("overrides, message", [
    (["distributed.learner_strategy=fsdp"],
     "learner_strategy=fsdp shards the model over the learners: set distributed.num_learners "
     ">= 2"),
])
def test_fsdp_settings_that_cannot_run_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_distributed(load_config("configs/default.yaml", overrides))


def test_fsdp_refuses_a_value_head_on_the_sharded_policy() -> None:
    cfg = load_config("configs/default.yaml", [
        "algo.preset=ppo", "critic.shared=true", "distributed.learner_strategy=fsdp",
        "distributed.num_learners=2", "distributed.backend=ray"])
    with pytest.raises(ConfigError, match=re.escape(
            "critic.shared=true with distributed.learner_strategy=fsdp: a value head on the "
            "sharded policy is not supported; set critic.shared=false")):
        validate(cfg)
