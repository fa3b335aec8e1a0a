"""The distributed pieces of a run (``distributed.backend=ray``), seen from the driver.

:func:`start` brings up the rollout workers with the current policy, the stream of groups
they play, asynchronous collection (``train.mode=async``) and data-parallel learners
(``distributed.num_learners > 1``). :class:`ScaleOut` then answers the loop's few
questions: how to play groups, how to update, how to push weights, what the workers did.
The Ray code itself lives in ``turnrl.distributed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from turnrl.train.learner import Learner
from turnrl.train.setup import Run, engine_options, sampling
from turnrl.types import TrainBatch, Trajectory

if TYPE_CHECKING:  # Ray is an optional extra: imported only when a run uses it
    from turnrl.distributed.learner_group import LearnerGroup
    from turnrl.distributed.rollout_cluster import AsyncCollector, GroupStream, RayCluster


@dataclass
class ScaleOut:
    """The Ray cluster, its group stream, async collection and learner group of a run."""

    cluster: RayCluster
    stream: GroupStream
    source: AsyncCollector | None = None  # train.mode=async
    learners: LearnerGroup | None = None  # distributed.num_learners > 1
    last_stats: list[dict[str, float]] = field(default_factory=list)

    def play(self) -> Callable[[int, int], list[Trajectory]]:
        return lambda first, n: self.stream.collect(list(range(first, first + n)))

    def update(self, learner: Learner, batch: TrainBatch, *, train_policy: bool
               ) -> dict[str, float]:
        if self.learners is not None:  # data-parallel: every learner runs its share
            return self.learners.update(learner, batch, train_policy=train_policy)
        return learner.update(batch, train_policy=train_policy)

    def push_weights(self, learner: Learner, version: int, *, wait: bool) -> None:
        self.cluster.push_weights(learner.policy, version, wait=wait)

    def gather_states(self, learner: Learner) -> None:
        if self.learners is not None:
            self.learners.sync_states(learner)

    def worker_metrics(self, policy_version: int) -> dict[str, float]:
        """``perf/``: each rollout worker's episodes/s, sampled tokens/s and busy fraction
        since the last step, the restarts so far and the policy version."""
        now = self.cluster.worker_stats()
        before = self.last_stats or [dict.fromkeys(now[0], 0.0) for _ in now]
        self.last_stats = now
        metrics = {"perf/worker_restarts": float(self.cluster.restarts),
                   "perf/policy_version": float(policy_version)}
        total = 0.0
        for i, (a, b) in enumerate(zip(now, before, strict=True)):
            dt = max(a["wall_s"] - b["wall_s"], 1e-9)
            episodes = (a["episodes"] - b["episodes"]) / dt
            total += episodes
            metrics[f"perf/rollout-{i}/episodes_per_s"] = episodes
            metrics[f"perf/rollout-{i}/tokens_per_s"] = (a["sampled_tokens"]
                                                         - b["sampled_tokens"]) / dt
            metrics[f"perf/rollout-{i}/busy_frac"] = (a["busy_s"] - b["busy_s"]) / dt
        metrics["perf/episodes_per_s"] = total
        pairs = list(zip(now, before, strict=True))
        prompt = sum(a["prompt_tokens"] - b["prompt_tokens"] for a, b in pairs)
        cached = sum(a["cached_tokens"] - b["cached_tokens"] for a, b in pairs)
        metrics["rollout/prefix_cache_hit_rate"] = cached / prompt if prompt else 0.0
        return metrics

    def close(self) -> None:
        if self.learners is not None:
            self.learners.close()
        self.cluster.close()


def start(run: Run, *, version: int, cursor: int) -> ScaleOut | None:
    """The Ray pieces of ``run`` (None on ``distributed.backend=none``), with the workers
    sampling policy ``version`` and async collection starting at task ``cursor``."""
    cfg, d = run.cfg, run.cfg.distributed
    if d.backend != "ray":
        return None
    from turnrl.distributed.learner_group import LearnerGroup
    from turnrl.distributed.rollout_cluster import AsyncCollector, GroupStream, RayCluster

    # a fixed cap (a curriculum needs distributed.backend=none: config.checks says so)
    params, runner_kwargs = sampling(cfg, cfg.rollout.temperature, cfg.rollout.turn_cap(0))
    cluster = RayCluster(
        d, policy=run.model.policy, tokenizer=run.model.tokenizer, make_env=run.make_env,
        params=params, runner_kwargs=runner_kwargs,
        engine_kwargs=engine_options(cfg))
    cluster.push_weights(run.model.policy, version, wait=True)
    first_seed = cfg.env.train_seed_start
    stream = GroupStream(cluster, cfg.train.group_size, seed_of=lambda index: first_seed + index)
    t = cfg.train
    source = (AsyncCollector(stream, t.n_groups, t.max_staleness, start=cursor,
                             max_rejected=t.n_groups * t.max_sampling_tries)
              if t.mode == "async" else None)
    learners = LearnerGroup(d, run.device) if d.num_learners > 1 else None
    return ScaleOut(cluster, stream, source, learners)
