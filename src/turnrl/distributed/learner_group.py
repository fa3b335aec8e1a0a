"""The learner side of the Ray backend (``distributed.backend=ray``): N data-parallel learners.

This module owns :class:`LearnerGroup` (the driver's side of the group) and the
:class:`LearnerWorker` actors that join it, with the helpers both ranks share (replica sync,
sharded learners, gathered states). The rollout side (Ray's start-up, env and rollout
workers, weight pushes) lives in ``turnrl.distributed.rollout_cluster``.

The driver is learner 0; ``num_learners − 1`` :class:`LearnerWorker` actors join it in a
torch.distributed group (``turnrl.distributed.data_parallel``), as replicas
(``learner_strategy=ddp``) or as FSDP2 shards (``fsdp``, ``turnrl.distributed.fsdp``: the
driver then also keeps a full copy of the weights, refreshed after every update).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from turnrl.distributed.data_parallel import DataParallel, free_port
from turnrl.distributed.fsdp import (
    full_model_state,
    full_optimizer_state,
    load_full_optimizer_state,
    shard_module,
)
from turnrl.types import TrainBatch


class LearnerWorker:
    """Learner ``rank ≥ 1`` of a data-parallel group: a replica (``ddp``) or a shard
    (``fsdp``) that runs its share of each update's forward passes (see
    ``turnrl.distributed.data_parallel``)."""

    def __init__(self, rank: int, world_size: int, init_method: str, backend: str,
                 threads: int = 1, strategy: str = "ddp") -> None:
        torch.set_num_threads(threads)
        self.rank, self.world_size = rank, world_size
        self.init_method, self.backend, self.strategy = init_method, backend, strategy
        self.dp: DataParallel | None = None
        self.learner: Any = None

    def setup(self, modules: tuple, algo: Any, settings: dict, seed: int,
              states: dict | None = None) -> None:
        """Join the group, then take rank 0's weights, optimizer and generator states (the
        same collective calls as :meth:`LearnerGroup.attach` on rank 0)."""
        from turnrl.train.learner import Learner

        if self.dp is None:
            self.dp = DataParallel(self.rank, self.world_size, self.init_method, self.backend,
                                   lockstep=self.strategy == "fsdp")
        if self.strategy == "fsdp":
            assert states is not None
            self.learner = sharded_learner(self.dp, modules, algo, settings, states)
            return
        policy, critic = modules
        self.learner = Learner(policy, algo, **settings, critic=critic, seed=seed, sync=self.dp)
        sync_replica(self.dp, self.learner)

    def update(self, batch: TrainBatch, train_policy: bool) -> dict[str, float]:
        return learner_update(self.learner, batch, train_policy,
                              sharded=self.strategy == "fsdp")[0]

    def gather_states(self) -> None:
        """Join rank 0's gathering of the sharded optimizer states (for a checkpoint)."""
        learner_states(self.learner)

    def parameters(self) -> list[torch.Tensor]:
        """The policy's parameters (tests compare them with rank 0's)."""
        return [p.detach().clone() for p in self.learner.policy.parameters()]


def sync_replica(dp: DataParallel, learner: Any) -> None:
    """Rank 0's parameters, optimizer states and shuffling generator on every rank."""
    dp.broadcast_modules([m for m in (learner.policy, learner.critic) if m is not None])
    state = dp.broadcast_object({
        "policy": learner.optimizer.state_dict(),
        "critic": learner.critic_optimizer.state_dict() if learner.critic_optimizer else None,
        "generator": learner.generator.get_state()} if dp.rank == 0 else None)
    assert isinstance(state, dict)
    if dp.rank != 0:
        learner.optimizer.load_state_dict(state["policy"])
        if learner.critic_optimizer is not None:
            learner.critic_optimizer.load_state_dict(state["critic"])
        learner.generator.set_state(state["generator"])


def learner_states(learner: Any) -> dict:
    """The optimizer states (gathered if sharded: a collective) and the shuffling generator
    of ``learner``, as an unsharded learner over the same parameters would hold them."""
    return {"policy": full_optimizer_state(learner.optimizer),
            "critic": (full_optimizer_state(learner.critic_optimizer)
                       if learner.critic_optimizer is not None else None),
            "generator": learner.generator.get_state()}


def sharded_learner(dp: DataParallel, modules: tuple, algo: Any, settings: dict,
                    states: dict) -> Any:
    """Shard the policy (and a separate critic) over the learners and build a learner on the
    shards that continues from ``states`` (:func:`learner_states` of the unsharded copy).
    Each pass makes one forward call per model (FSDP's collectives must line up), so the
    shared-prompt passes are off (the packed and padded passes give the same gradient)."""
    from turnrl.train.learner import Learner

    policy, critic = modules
    for module in (policy, critic):
        if module is not None:
            shard_module(module, dp.device, dp.world_size)
    train = settings["train"].model_copy(update={"share_prefix": False})
    learner = Learner(policy, algo, **{**settings, "train": train}, critic=critic, sync=dp)
    load_full_optimizer_state(learner.optimizer, states["policy"])
    if learner.critic_optimizer is not None:
        load_full_optimizer_state(learner.critic_optimizer, states["critic"])
    learner.generator.set_state(states["generator"])
    return learner


def learner_update(learner: Any, batch: TrainBatch, train_policy: bool, *,
                   sharded: bool) -> tuple[dict[str, float], tuple[dict, dict | None] | None]:
    """One update of this rank's learner; ``sharded``: then the full state dicts of the
    policy and critic, gathered (a collective; rank 0 gets them, the others ``{}``)."""
    metrics = learner.update(batch, train_policy=train_policy)
    if not sharded:
        return metrics, None
    return metrics, (full_model_state(learner.policy),
                     full_model_state(learner.critic) if learner.critic is not None else None)


class LearnerGroup:
    """The driver's side of ``num_learners`` data-parallel learners (it is rank 0).

    With ``learner_strategy=ddp`` the driver's learner is rank 0 itself. With ``fsdp`` rank 0
    is a sharded learner built from it (``self.sharded``), and the driver's learner is the
    full copy: its weights are refreshed after every update, its optimizer states and
    generator before every checkpoint (:meth:`sync_states`).

    Args:
        distributed: the ``distributed`` config section.
        device: the driver's device (the backend is nccl on CUDA, gloo on CPU by default).
    """

    def __init__(self, distributed: Any, device: torch.device) -> None:
        import ray

        d = distributed
        self.world_size = d.num_learners
        self.strategy = d.learner_strategy
        backend = d.learner_backend if d.learner_backend != "auto" else (
            "nccl" if device.type == "cuda" else "gloo")
        self.backend = backend
        address = ray.util.get_node_ip_address()
        self.init_method = f"tcp://{address}:{free_port()}"
        actor = ray.remote(LearnerWorker)
        self.helpers = [actor.options(num_cpus=d.cpus_per_learner,
                                      num_gpus=d.gpus_per_learner).remote(
            rank, self.world_size, self.init_method, backend, d.worker_threads, self.strategy)
            for rank in range(1, self.world_size)]
        self.dp: DataParallel | None = None
        self.attached: Any = None
        self.sharded: Any = None  # fsdp: rank 0's sharded learner

    def attach(self, learner: Any) -> None:
        """Make ``learner`` rank 0 (``fsdp``: the full copy behind rank 0's shards) and give
        every helper a replica or its shards of it."""
        import ray

        # one deepcopy: a shared critic keeps the policy's body
        modules = ray.put(tuple(m.cpu() if m is not None else None for m in copy.deepcopy(
            (learner.policy, learner.critic))))
        fsdp = self.strategy == "fsdp"
        states = learner_states(learner) if fsdp else None
        refs = [h.setup.remote(modules, learner.algo, learner.settings, 0, states)
                for h in self.helpers]
        if self.dp is None:  # joins the helpers' rendezvous
            self.dp = DataParallel(0, self.world_size, self.init_method, self.backend,
                                   lockstep=fsdp)
        if fsdp:
            assert states is not None
            self.sharded = sharded_learner(self.dp, ray.get(modules), learner.algo,
                                           learner.settings, copy.deepcopy(states))
        else:
            learner.sync = self.dp
            sync_replica(self.dp, learner)
        ray.get(refs)
        self.attached = learner

    def update(self, learner: Any, batch: TrainBatch, *, train_policy: bool) -> dict[str, float]:
        """One update on all learners (each runs its share of the passes)."""
        import ray

        if self.attached is not learner:  # a new learner (start, resume or rollback)
            self.attach(learner)
        ref = ray.put(batch)
        refs = [h.update.remote(ref, train_policy) for h in self.helpers]
        if self.sharded is None:
            metrics = learner.update(batch, train_policy=train_policy)
        else:  # rank 0 is the sharded copy: its gathered weights refresh the driver's
            metrics, states = learner_update(self.sharded, batch, train_policy, sharded=True)
            assert states is not None
            learner.policy.load_state_dict(states[0])
            if states[1] is not None:
                learner.critic.load_state_dict(states[1])
        ray.get(refs)
        return metrics

    def sync_states(self, learner: Any) -> None:
        """``fsdp``: gather the sharded optimizer states and rank 0's generator into the
        driver's ``learner`` (before a checkpoint reads them); ``ddp``: nothing to do."""
        import ray

        if self.sharded is None or self.attached is not learner:
            return
        refs = [h.gather_states.remote() for h in self.helpers]
        states = learner_states(self.sharded)
        ray.get(refs)
        learner.optimizer.load_state_dict(states["policy"])
        if learner.critic_optimizer is not None:
            learner.critic_optimizer.load_state_dict(states["critic"])
        learner.generator.set_state(states["generator"])

    def helper_parameters(self) -> list[list[torch.Tensor]]:
        import ray

        return ray.get([h.parameters.remote() for h in self.helpers])

    def close(self) -> None:
        import ray

        for helper in self.helpers:
            ray.kill(helper, no_restart=True)
        self.helpers = []
        if self.dp is not None:
            self.dp.close()
            self.dp = None
