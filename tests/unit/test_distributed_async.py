"""Asynchronous collection without Ray: the staleness bound on submission and on use, with
a fake group stream; the simulated-latency env; the distributed config checks."""

from __future__ import annotations

import time

import pytest

from turnrl import envs
from turnrl.config import ConfigError, load_config
from turnrl.config.checks import check_distributed
from turnrl.distributed.rollout_cluster import AsyncCollector, staleness
from turnrl.envs.latency import SimulatedLatency
from turnrl.types import Trajectory


class FakeStream:
    """Groups finish in submission order; each group's tokens carry ``version_of(index)``."""

    def __init__(self) -> None:
        self.submitted: list[int] = []
        self.version_of = lambda index: 0
        self.pending: dict[int, int] = {}

    def submit(self, index: int) -> None:
        self.submitted.append(index)
        self.pending[index] = self.version_of(index)

    def wait(self) -> list[tuple[int, list[Trajectory]]]:
        index = min(self.pending)
        version = self.pending.pop(index)
        group = [Trajectory(env_id="x-v0", seed=index, group_id=index, messages=[],
                            token_ids=[1], loss_mask=[1], logprobs=[0.0], turn_index=[0],
                            turn_rewards=[float(member)],
                            policy_versions=[version]) for member in range(2)]
        return [(index, group)]


def test_staleness_is_counted_from_the_oldest_token() -> None:
    group = [Trajectory(env_id="x-v0", seed=0, group_id=0, messages=[],
                        policy_versions=versions) for versions in ([3, 4], [2, 5])]
    assert staleness(group, 6) == 4
    assert staleness([Trajectory(env_id="x-v0", seed=0, group_id=0, messages=[])], 6) == 0


@pytest.mark.parametrize("max_staleness", [0, 1, 2])
def test_groups_start_at_most_max_staleness_batches_ahead(max_staleness: int) -> None:
    stream = FakeStream()
    collector = AsyncCollector(stream, n_groups=3, max_staleness=max_staleness)  # type: ignore[arg-type]
    collector.fill()
    # batch 0 and the next max_staleness batches may be sampled with the weights of version 0
    assert stream.submitted == list(range(3 * (max_staleness + 1)))
    batch, metrics = collector.next_batch(0, lambda group: group)
    assert [t.group_id for t in batch[::2]] == [0, 1, 2]
    assert metrics["perf/staleness_0"] == 3.0 and metrics["perf/dropped_stale"] == 0.0
    collector.fill()  # after one update, one more batch may start
    assert len(stream.submitted) == 3 * (max_staleness + 2)


def test_too_stale_groups_are_dropped_and_replaced() -> None:
    stream = FakeStream()
    collector = AsyncCollector(stream, n_groups=2, max_staleness=1)  # type: ignore[arg-type]
    stream.version_of = lambda index: 0 if index < 4 else 2
    collector.fill()  # groups 0..3 at version 0
    # the learner is already at version 2: groups sampled at version 0 are 2 updates behind
    batch, metrics = collector.next_batch(2, lambda group: group)
    assert metrics["perf/dropped_stale"] == 4.0
    assert sorted({t.group_id for t in batch}) == [4, 5]
    assert metrics["perf/staleness_0"] == 2.0
    assert collector.dropped_stale == 4


def test_rejected_groups_are_replaced_and_a_batch_gives_up_after_max_rejected() -> None:
    stream = FakeStream()
    collector = AsyncCollector(stream, n_groups=2, max_staleness=0,  # type: ignore[arg-type]
                               max_rejected=5)
    odd_only = lambda group: group if group[0].group_id % 2 else []  # noqa: E731
    batch, _ = collector.next_batch(0, odd_only)
    assert sorted({t.group_id for t in batch}) == [1, 3]
    nothing, _ = collector.next_batch(1, lambda group: [])  # every episode failed, say
    assert nothing == []


def test_simulated_latency_is_heavy_tailed_and_reproducible_per_seed() -> None:
    env = SimulatedLatency(envs.make("frozenlake-v0"), median_s=0.01, sigma=1.0)
    assert env.spec.slow_steps and env.spec.id == "frozenlake-v0"
    env.rng.seed("latency-7")
    delays = [env.delay() for _ in range(2000)]
    env.rng.seed("latency-7")
    assert [env.delay() for _ in range(2000)] == delays
    delays.sort()
    assert 0.008 < delays[1000] < 0.0125  # median
    assert delays[1980] > 8 * delays[1000]  # p99 ≈ e^2.33 ≈ 10x the median
    slow = SimulatedLatency(envs.make("frozenlake-v0"), median_s=0.05, sigma=0.0)
    start = time.perf_counter()
    slow.reset(seed=3)
    assert time.perf_counter() - start >= 0.05  # sigma 0: exactly the median
    env.reset(seed=3)
    plain = envs.make("frozenlake-v0")
    plain.reset(seed=3)
    assert env.oracle_action() == plain.oracle_action()  # capabilities pass through
    assert env.state_key() == plain.state_key()


@pytest.mark.parametrize("overrides, message", [
    (["train.mode=async"], "train.mode=async runs on Ray: set distributed.backend=ray"),
    (["distributed.num_learners=2"], "distributed.num_learners=2 runs on Ray"),
    (["distributed.backend=ray", "distributed.num_rollout_workers=2",
      "distributed.num_cpus=1"], "the workers need 2 CPUs but the Ray cluster has 1"),
    (["distributed.backend=ray", "distributed.gpus_per_rollout_worker=1"],
     "the workers need 1 GPUs but the Ray cluster has 0"),
])
def test_distributed_settings_that_cannot_run_are_refused_before_any_work(
        overrides: list[str], message: str) -> None:
    cfg = load_config("configs/default.yaml", overrides)
    with pytest.raises(ConfigError, match=message):
        check_distributed(cfg)
