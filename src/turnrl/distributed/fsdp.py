"""FSDP2 learners (``distributed.learner_strategy=fsdp``): parameters, gradients and optimizer
states sharded over the learners with torch's ``fully_shard``.

Each transformer block (the classes a Hugging Face model lists in ``_no_split_modules``) and
then the whole model become FSDP units. A forward all-gathers a unit's parameters just before
it runs and frees them after; the backward reduce-scatters the gradients, so each learner
keeps ``1/N`` of every parameter, gradient and AdamW moment. The reduction is a *sum* (divide
factor 1), the same mini-batch gradient the replicated path sums with ``all_reduce`` (see
``turnrl.distributed.data_parallel``):

    grad_shard_r = (Σ_ranks Σ_{passes of rank} ∇ loss_pass)[shard r] = ∇ loss_minibatch[shard r]

Every forward and backward is a collective, so the learners run their passes in lockstep: a
rank with fewer passes in a step runs filler passes whose loss is multiplied by 0
(``DataParallel.shard``). Parameters that are not sharded (a shared critic's value head)
stay replicated and are all-reduced as before.

The driver keeps a full, unsharded copy of the weights: its engine samples with them, the
scoring passes (old, reference log-probs, critic values) and checkpoints read them. After each
update the learners gather the full state (``get_model_state_dict(full_state_dict=True)``)
into that copy; optimizer states are gathered only when a checkpoint is written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import torch
from torch import Tensor, nn

# torch.distributed.{fsdp,tensor,checkpoint} take ~1.5 s to import: only FSDP runs import them


def block_classes(module: nn.Module) -> set[str]:
    """Class names of the transformer blocks: the union of ``_no_split_modules`` over the
    module tree (a PEFT wrapper or a critic holds the Hugging Face model inside)."""
    names: set[str] = set()
    for sub in module.modules():
        names.update(getattr(sub, "_no_split_modules", None) or [])
    return names


def shard_module(module: nn.Module, device: torch.device, world_size: int) -> None:
    """Shard ``module`` in place over a 1-D mesh of ``world_size`` learners: one FSDP unit per
    transformer block, one for the rest; gradients are summed over the learners."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    mesh = init_device_mesh(device.type, (world_size,))
    module.to(device)
    blocks = block_classes(module)
    if not blocks:
        raise ValueError(f"{type(module).__name__} lists no transformer blocks "
                         "(_no_split_modules); FSDP needs them to cut the model into units")
    for sub in list(module.modules()):
        if type(sub).__name__ in blocks:
            fully_shard(sub, mesh=mesh)
    fully_shard(module, mesh=mesh)
    for sub in module.modules():
        if isinstance(sub, FSDPModule):
            sub.set_gradient_divide_factor(1.0)  # a sum, not FSDP's default mean
            sub.set_force_sum_reduction_for_comms(True)  # plain SUM (gloo has no PREMUL_SUM)


def is_sharded(tensor: object) -> bool:
    """Whether ``tensor`` is a ``DTensor`` (an FSDP shard); no DTensor exists, and nothing is
    imported, until some model is sharded."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def clip_grad_norm(params: Iterable[nn.Parameter], max_norm: float) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over sharded and replicated parameters: the global
    2-norm ``sqrt(Σ_sharded ‖g‖² + Σ_replicated ‖g‖²)`` (the sharded part reduced over the
    learners), then every gradient scaled by ``min(1, max_norm / (norm + 1e-6))``. Returns
    the norm before clipping (inf or nan when a gradient is)."""
    params = [p for p in params if p.grad is not None]
    grads = [p.grad for p in params]
    if not any(is_sharded(g) for g in grads):
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    squares = torch.zeros((), dtype=torch.float64)
    for g in grads:
        norm = torch.linalg.vector_norm(g.float())
        if is_sharded(norm):
            norm = norm.full_tensor()  # the shards' norms, reduced over the learners
        squares = squares + norm.double().cpu() ** 2
    total = float(squares.sqrt())
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:  # (a non-finite norm makes coef 0 or nan: the caller skips the step)
        for g in grads:
            g.mul_(coef)
    return total


def full_model_state(module: nn.Module) -> dict[str, Tensor]:
    """Collective (every learner calls it): the full, unsharded state dict on CPU, on rank 0
    (the other ranks get ``{}``)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True,
                                                                 cpu_offload=True))


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict:
    """Collective: ``optimizer.state_dict()`` with every sharded state tensor (AdamW's
    moments) gathered, on CPU: the state dict an unsharded optimizer over the same
    parameters would have (keyed by parameter index)."""
    state = optimizer.state_dict()
    return {"state": {index: {key: (value.full_tensor() if is_sharded(value)
                                    else value).cpu() if torch.is_tensor(value) else value
                              for key, value in entry.items()}
                      for index, entry in state["state"].items()},
            "param_groups": state["param_groups"]}


def load_full_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load an unsharded optimizer state dict (every learner holds the same one) into an
    optimizer over sharded parameters: each state tensor shaped like its parameter is cut to
    this learner's shard (no communication)."""
    from torch.distributed.tensor import distribute_tensor

    params = [p for group in optimizer.param_groups for p in group["params"]]
    sharded = {}
    for index, entry in state["state"].items():
        param = params[int(index)]
        sharded[index] = {
            key: distribute_tensor(value.to(param.device), param.device_mesh, param.placements,
                                   src_data_rank=None)
            if is_sharded(param) and torch.is_tensor(value)
            and value.shape == param.shape else value
            for key, value in entry.items()}
    optimizer.load_state_dict({"state": sharded, "param_groups": state["param_groups"]})
