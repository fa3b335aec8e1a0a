"""Data-parallel learning over torch.distributed (gloo on CPU, NCCL on GPU).

N learner processes hold identical replicas of the policy (and critic) and optimizers. Each
optimizer step's mini-batch is cut into forward passes exactly as on one process; rank r runs
passes r, r + N, r + 2N, ... and the gradients are summed over the ranks with one
``all_reduce`` per step before clipping and the optimizer step. Every loss term is already
normalised by the *mini-batch's* token and sequence counts (see ``turnrl.train.learner``), so

    Σ_ranks Σ_{passes of rank} ∇ loss_pass = Σ_{all passes} ∇ loss_pass = ∇ loss_minibatch,

the same gradient as one process computes: results do not depend on the number of learners
for a fixed global batch (up to float summation order). The reduction is the one DDP makes,
done once per optimizer step rather than per backward pass, so ranks may run different numbers
of passes (token-budget micro-batches vary in count) without DDP's uneven-input hangs.

With ``distributed.learner_strategy=fsdp`` the parameters are sharded instead
(``turnrl.distributed.fsdp``): every forward and backward is then a collective, so the ranks
run the same number of passes (``lockstep``), the sharded gradients are summed by FSDP's
reduce-scatter, and ``all_reduce_grads`` only sums the parameters that stay replicated.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn

from turnrl.distributed.fsdp import clip_grad_norm, is_sharded

T = TypeVar("T")


def free_port() -> int:
    """A TCP port that is free on this host now (for the rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


class DataParallel:
    """This process's place in a group of learners.

    Args:
        rank: this learner's rank (0 is the driver: it checkpoints, logs and evaluates).
        world_size: the number of learners.
        init_method: the rendezvous, e.g. ``tcp://10.0.0.1:29500``.
        backend: ``gloo`` (CPU tensors) or ``nccl`` (CUDA tensors).
        lockstep: every rank runs the same number of forward passes per step (FSDP).
    """

    def __init__(self, rank: int, world_size: int, init_method: str, backend: str = "gloo",
                 timeout_s: float = 600.0, *, lockstep: bool = False) -> None:
        import datetime

        self.rank, self.world_size = rank, world_size
        self.lockstep = lockstep
        self.group = None
        if not dist.is_initialized():
            dist.init_process_group(backend, init_method=init_method, rank=rank,
                                    world_size=world_size,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        self.device = torch.device("cuda", torch.cuda.current_device()) \
            if backend == "nccl" else torch.device("cpu")

    def shard(self, passes: Sequence[T]) -> list[T | None]:
        """This rank's forward passes of a step: ``passes[rank::world_size]``; in ``lockstep``
        padded with ``None`` (a filler pass: run one, for the collectives, with loss × 0) to
        ``ceil(len(passes) / world_size)``."""
        mine: list[T | None] = list(passes[self.rank::self.world_size])
        if self.lockstep:
            mine += [None] * (-(-len(passes) // self.world_size) - len(mine))
        return mine

    def all_reduce_grads(self, params: Iterable[nn.Parameter]) -> None:
        """Sum every parameter's gradient over the ranks, in one flat buffer. A rank that ran
        no pass for a parameter adds 0; a parameter no rank has a gradient for keeps
        ``grad = None`` (as on one process, so the optimizer skips it). Sharded (FSDP)
        parameters are left out: their reduce-scatter already summed them."""
        params = [p for p in params if p.requires_grad and not is_sharded(p)]
        if not params:
            return
        has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32,
                           device=self.device)
        dist.all_reduce(has, op=dist.ReduceOp.MAX)
        params = [p for p, h in zip(params, has.tolist(), strict=True) if h]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if not params:
            return
        flat = torch.cat([p.grad.reshape(-1).to(self.device, torch.float32) for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n

    def sum_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        """Sum per-rank metric sums over the ranks (a key one rank lacks counts as 0)."""
        keys: list[list[str] | None] = [None] * self.world_size
        dist.all_gather_object(keys, sorted(sums))
        names = sorted({k for ks in keys if ks for k in ks})
        values = torch.tensor([float(sums.get(k, 0.0)) for k in names], dtype=torch.float64,
                              device=self.device)
        dist.all_reduce(values)
        return dict(zip(names, values.tolist(), strict=True))

    def clip_grad_norm(self, params: Iterable[nn.Parameter], max_norm: float) -> float:
        """The global gradient norm over sharded and replicated parameters, clipped
        (:func:`turnrl.distributed.fsdp.clip_grad_norm`)."""
        return clip_grad_norm(params, max_norm)

    def broadcast_modules(self, modules: Iterable[nn.Module]) -> None:
        """Copy rank 0's parameters and buffers to every rank (fresh LoRA adapters and
        critic heads are initialised at random on each rank)."""
        for module in modules:
            for tensor in [*module.parameters(), *module.buffers()]:
                data = tensor.data.to(self.device)
                dist.broadcast(data, src=0)
                tensor.data.copy_(data)

    def broadcast_object(self, obj: object) -> object:
        """Rank 0's ``obj`` on every rank (optimizer and generator states)."""
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
