"""The rollout side of the Ray backend (``distributed.backend=ray``): env and rollout workers.

This module owns Ray's start-up (:class:`RayCluster`, which also checks that every worker of
the run fits the cluster, :func:`check_resources`), the weight pushes to the rollout workers,
the groups in flight (:class:`GroupStream`) and asynchronous collection
(:class:`AsyncCollector`, :func:`staleness`). The learners live in
``turnrl.distributed.learner_group``.

The driver (the process that runs ``turnrl train``) keeps the loop of ``turnrl.train.loop``:
it asks this backend for groups of episodes instead of playing them itself, and hands each
update to the learner group. What runs where:

- **Env workers** (:class:`~turnrl.distributed.env_worker.EnvWorker`, threaded actors): host
  the envs (sandboxes, retrievers) when ``num_env_workers > 0``.
- **Rollout workers** (:class:`~turnrl.distributed.rollout_worker.RolloutWorker`, async
  actors): one engine each; a group of episodes is one task (:meth:`GroupStream.submit`).
- **Learners**: see ``turnrl.distributed.learner_group``.

Weights move through Ray's object store: after each update the driver puts the policy's
state dict once and every rollout worker loads it (``ray.put`` + ``load_weights``); a
colocated vLLM engine would take CUDA IPC handles instead (not built: no GPU here).

Failures: workers are created with ``max_restarts=-1``, so Ray restarts a killed worker. A
group whose rollout worker died, or whose env worker died under it, fails as a whole; the
stream pushes the current weights to the restarted worker and submits the group again with
the same seed and group id (same sampling seeds, so the same episodes), and the group counts
only when it comes back whole: nothing is double counted.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from turnrl.config import ConfigError
from turnrl.console import RAY_ACTOR_NOTICE, held_back_stderr
from turnrl.distributed.env_worker import ENV_WORKER_CONCURRENCY, EnvWorker
from turnrl.distributed.rollout_worker import RolloutWorker
from turnrl.rollout.runner import WorkerLost
from turnrl.types import Trajectory

log = logging.getLogger("turnrl")

RESTART_TIMEOUT_S = 300.0  # a restarted worker must be back within this


def lost_worker(error: BaseException) -> bool:
    """Did this task fail because a worker process died (rather than a bug in the task)?"""
    import ray

    return isinstance(error, (ray.exceptions.RayActorError,
                              ray.exceptions.ActorUnavailableError, WorkerLost))


@dataclass
class _Task:
    index: int  # group index: the task seed is seed_of(index), the group id is index
    worker: int
    submitted: float = field(default_factory=time.perf_counter)


class RayCluster:
    """Starts (or joins) Ray and creates the env and rollout workers of a run.

    Args:
        distributed: the ``distributed`` config section.
        policy: the policy (copied to every rollout worker; its weights follow by push).
        tokenizer: the policy's tokenizer.
        make_env: a picklable env factory (``turnrl.train.loop.env_factory``).
        params, runner_kwargs, engine_kwargs: how the workers' runners and engines sample.
    """

    def __init__(self, distributed: Any, *, policy: torch.nn.Module, tokenizer: Any,
                 make_env: Callable, params: Any, runner_kwargs: dict,
                 engine_kwargs: dict) -> None:
        import ray

        d = self.cfg = distributed
        self.started_ray = not ray.is_initialized()
        if self.started_ray:
            if d.ray_address is None:  # a private local instance, gone with the run
                # Ray nices its workers to 15 by default: beside the driver (the learner) or
                # any other job they would get a sliver of the CPU (20x slower decoding)
                ray.init(address="local", num_cpus=d.num_cpus, include_dashboard=False,
                         log_to_driver=False, configure_logging=False,
                         _system_config={"worker_niceness": 0})
            else:
                ray.init(address=d.ray_address, log_to_driver=False, configure_logging=False)
        try:
            check_resources(d)
        except ConfigError:
            if self.started_ray:
                ray.shutdown()
            raise
        env_actor = ray.remote(EnvWorker)
        self.env_workers = [
            env_actor.options(num_cpus=d.cpus_per_env_worker, max_restarts=-1,
                              max_concurrency=ENV_WORKER_CONCURRENCY).remote(make_env)
            for _ in range(d.num_env_workers)]
        rollout_actor = ray.remote(RolloutWorker)
        device = "cuda" if d.gpus_per_rollout_worker > 0 else "cpu"
        # kept referenced for the run: a restarted worker is rebuilt from it
        self.model = model = ray.put(copy.deepcopy(policy).cpu())
        with held_back_stderr(RAY_ACTOR_NOTICE):  # Ray's notice about exactly that
            self.rollout_workers = [
                rollout_actor.options(num_cpus=d.cpus_per_rollout_worker,
                                      num_gpus=d.gpus_per_rollout_worker, max_restarts=-1
                                      ).remote(
                    model, tokenizer, make_env, params, runner_kwargs, engine_kwargs,
                    env_workers=self.env_workers, threads=d.worker_threads, device=device,
                    name=f"rollout-{i}")
                for i in range(d.num_rollout_workers)]
        self.weights: Any = None  # the newest pushed state dict (an ObjectRef) and version
        self.version = 0
        self.restarts = 0

    def push_weights(self, model: torch.nn.Module, version: int, *, wait: bool) -> None:
        """Send ``model``'s weights, as ``version``, to every rollout worker (one object in
        Ray's store); ``wait`` blocks until all have loaded them."""
        import ray

        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self.weights, self.version = ray.put(state), version
        refs = [w.load_weights.remote(self.weights, version) for w in self.rollout_workers]
        if wait:
            ray.get(refs)

    def resync(self, worker: int) -> None:
        """A worker restarted: give it the current weights (waits until it is back)."""
        import ray

        self.restarts += 1
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while self.weights is not None:
            try:
                ray.get(self.rollout_workers[worker].load_weights.remote(self.weights,
                                                                         self.version))
                return
            except ray.exceptions.ActorUnavailableError:  # still restarting
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def worker_stats(self) -> list[dict[str, float]]:
        import ray

        return ray.get([w.stats.remote() for w in self.rollout_workers])

    def close(self) -> None:
        import ray

        for actor in self.rollout_workers + self.env_workers:
            ray.kill(actor, no_restart=True)
        self.rollout_workers, self.env_workers = [], []
        if self.started_ray and ray.is_initialized():
            ray.shutdown()


def check_resources(d: Any, have: dict[str, float] | None = None) -> None:
    """The workers fit the Ray cluster's resources ``have`` (default: the running cluster's),
    else Ray would wait for resources forever."""
    if have is None:
        import ray

        have = ray.cluster_resources()
    need = {"CPU": (d.num_env_workers * d.cpus_per_env_worker
                    + d.num_rollout_workers * d.cpus_per_rollout_worker
                    + (d.num_learners - 1) * d.cpus_per_learner),
            "GPU": (d.num_rollout_workers * d.gpus_per_rollout_worker
                    + (d.num_learners - 1) * d.gpus_per_learner)}
    for kind, needed in need.items():
        if needed > have.get(kind, 0.0) + 1e-9:
            raise ConfigError(
                f"distributed: the workers need {needed:g} {kind}s but the Ray cluster has "
                f"{have.get(kind, 0.0):g}; lower distributed.{kind.lower()}s_per_* or the "
                "number of workers" + (", or raise distributed.num_cpus" if kind == "CPU"
                                       else ""))


class GroupStream:
    """Groups of episodes in flight on the rollout workers, received as they finish.

    Args:
        cluster: the workers.
        group_size: episodes per group.
        seed_of: the task seed of group index ``i``.
    """

    def __init__(self, cluster: RayCluster, group_size: int,
                 seed_of: Callable[[int], int]) -> None:
        self.cluster = cluster
        self.group_size = group_size
        self.seed_of = seed_of
        self.pending: dict[Any, _Task] = {}
        self.resubmitted = 0

    def submit(self, index: int) -> None:
        """Start group ``index`` on the least busy rollout worker."""
        load = [0] * len(self.cluster.rollout_workers)
        for task in self.pending.values():
            load[task.worker] += 1
        worker = min(range(len(load)), key=load.__getitem__)
        self._start(_Task(index, worker))

    def _start(self, task: _Task) -> None:
        ref = self.cluster.rollout_workers[task.worker].run_group.remote(
            self.seed_of(task.index), task.index, self.group_size,
            min_version=self.cluster.version)
        self.pending[ref] = task

    def wait(self, *, at_least: int = 1) -> list[tuple[int, list[Trajectory]]]:
        """Block until ``at_least`` groups are done (or none are in flight); returns
        (group index, trajectories) of every group done by then. A group lost with its
        worker is submitted again, to the same (restarted) worker."""
        import ray

        done: list[tuple[int, list[Trajectory]]] = []
        while self.pending and len(done) < at_least:
            ready, _ = ray.wait(list(self.pending), num_returns=1)
            ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
            for ref in ready:
                task = self.pending.pop(ref)
                try:
                    done.append((task.index, ray.get(ref)))
                except Exception as error:
                    if not lost_worker(error):
                        raise
                    log.warning("rollout worker %d lost group %d (seed %d): %s; Ray restarts "
                                "the worker and the group is played again",
                                task.worker, task.index, self.seed_of(task.index),
                                str(error).splitlines()[0][:200])
                    self.cluster.resync(task.worker)
                    self.resubmitted += 1
                    self._start(_Task(task.index, task.worker))
        return done

    def collect(self, indices: list[int]) -> list[Trajectory]:
        """Play the groups ``indices`` and return their episodes in that order."""
        for index in indices:
            self.submit(index)
        results: dict[int, list[Trajectory]] = {}
        while len(results) < len(indices):
            results.update(self.wait())
        return [traj for index in indices for traj in results[index]]


def staleness(group: list[Trajectory], version: int) -> int:
    """Learner updates between a group's oldest sampled token and ``version`` (the policy
    that trains on it)."""
    oldest = min((min(t.policy_versions) for t in group if t.policy_versions),
                 default=version)
    return version - oldest


class AsyncCollector:
    """Asynchronous collection: rollout workers keep sampling while the learner updates.

    The j-th group slot belongs to the collector's batch ``j // n_groups``; it may start once
    ``j // n_groups − max_staleness`` batches have been taken (updates made), so
    ``max_staleness = 0`` is synchronous: a batch's groups start only after the previous
    update, with its weights. Each batch takes the groups that
    finish first; a group whose oldest token is more than ``max_staleness`` versions behind
    the learner is dropped, counted and replaced by a new task.

    Args:
        stream: the groups in flight.
        n_groups: groups per batch.
        max_staleness: see above.
        start: the first group index (the task-seed cursor).
        max_rejected: a batch gives up after this many dropped or rejected groups and
            returns what it has (so a run whose every episode fails stops, not hangs).
    """

    def __init__(self, stream: GroupStream, n_groups: int, max_staleness: int, *,
                 start: int = 0, max_rejected: int = 64) -> None:
        self.stream = stream
        self.max_rejected = max_rejected
        self.n_groups = n_groups
        self.max_staleness = max_staleness
        self.start = start
        self.next_index = start
        self.taken = 0  # batches handed to the learner so far
        self.ready: list[tuple[int, list[Trajectory]]] = []
        self.dropped_stale = 0

    def fill(self) -> None:
        """Submit every group the staleness bound allows now (a dropped group's slot is
        given to a new one: ``start`` moves on)."""
        while ((self.next_index - self.start) // self.n_groups
               <= self.taken + self.max_staleness):
            self.stream.submit(self.next_index)
            self.next_index += 1

    def next_batch(self, version: int, accept: Callable[[list[Trajectory]], list[Trajectory]]
                   ) -> tuple[list[Trajectory], dict[str, float]]:
        """The next batch for learner ``version``: ``n_groups`` groups that ``accept`` keeps
        (it scores a group and returns what to train on, [] to drop it), with the staleness
        histogram and the time spent waiting."""
        t0 = time.perf_counter()
        kept: list[tuple[int, list[Trajectory]]] = []
        hist: dict[int, int] = {}
        dropped = rejected = 0
        while len(kept) < self.n_groups and dropped + rejected < self.max_rejected:
            self.fill()
            if not self.ready:
                self.ready.extend(self.stream.wait())
            self.ready.sort(key=lambda item: item[0])
            index, group = self.ready.pop(0)
            lag = staleness(group, version)
            if lag > self.max_staleness:
                dropped += 1
                self.start += 1  # its slot is taken by a new group
                continue
            use = accept(group)
            if not use:
                rejected += 1
                self.start += 1
                continue
            hist[lag] = hist.get(lag, 0) + 1
            kept.append((index, use))
        waited = time.perf_counter() - t0
        self.taken += 1
        self.dropped_stale += dropped
        kept.sort(key=lambda item: item[0])
        metrics = {f"perf/staleness_{lag}": float(n) for lag, n in sorted(hist.items())}
        metrics.update({
            "perf/staleness_mean": sum(lag * n for lag, n in hist.items()) / max(len(kept), 1),
            "perf/dropped_stale": float(dropped), "perf/learner_wait_s": waited,
            "perf/in_flight_groups": float(len(self.stream.pending)),
            "perf/ready_groups": float(len(self.ready))})
        return [t for _, group in kept for t in group], metrics
