"""Where ``turnrl pretrain`` runs: one process, torchrun's processes, or Ray actors.

Rank 0 (the calling process) makes or resumes the run dir, holds its lock, checkpoints, logs
and writes the model; the other ranks compute their rows' gradients
(:func:`turnrl.pretrain.loop.pretrain`). Under ``torchrun`` every process runs the command and
rank 0 tells the others the run dir; with ``distributed.backend=ray`` the driver is rank 0 and
starts ``num_learners - 1`` actors that join it over TCP (gloo on CPU, NCCL on GPUs).
"""

from __future__ import annotations

from pathlib import Path

from turnrl.config import PretrainConfig
from turnrl.distributed.data_parallel import DataParallel, free_port
from turnrl.io import lock_run_dir
from turnrl.pretrain.loop import (
    PretrainResult,
    check_pretrain_config,
    data_parallel,
    open_pretrain_run,
    pretrain,
)


def launch(cfg: PretrainConfig, *, resume: Path | None = None) -> PretrainResult:
    """Pretrain as ``cfg`` says; ``resume``: continue the run in that dir."""
    check_pretrain_config(cfg)
    if cfg.distributed.backend == "ray" and cfg.distributed.num_learners > 1:
        return _launch_ray(cfg, resume)
    group = data_parallel(cfg)
    if group is not None and group.rank != 0:
        run_dir = group.broadcast_object(None)
        assert isinstance(run_dir, Path)
        pretrain(cfg, run_dir, resume=resume is not None, group=group)
        group.close()
        raise SystemExit(0)  # rank 0 reports
    run_dir = open_pretrain_run(cfg, resume)
    lock = lock_run_dir(run_dir)
    try:
        if group is not None:
            group.broadcast_object(run_dir)
        result = pretrain(cfg, run_dir, resume=resume is not None, group=group)
        assert result is not None
        return result
    finally:
        lock.release()
        if group is not None:
            group.close()


def _rank(cfg: PretrainConfig, run_dir: Path, resume: bool, rank: int, world: int,
          init_method: str) -> None:
    """A Ray actor's part: join the group and pretrain its rows."""
    group = data_parallel(cfg, rank, world, init_method)
    pretrain(cfg, run_dir, resume=resume, group=group)
    if group is not None:
        group.close()


def _launch_ray(cfg: PretrainConfig, resume: Path | None) -> PretrainResult:
    import ray

    world = cfg.distributed.num_learners
    run_dir = open_pretrain_run(cfg, resume)
    lock = lock_run_dir(run_dir)
    started = not ray.is_initialized()
    if started:
        ray.init(address=cfg.distributed.ray_address, include_dashboard=False,
                 log_to_driver=False)
    try:
        init_method = f"tcp://{ray.util.get_node_ip_address()}:{free_port()}"
        task = ray.remote(num_cpus=cfg.run.threads)(_rank)
        others = [task.remote(cfg, run_dir.resolve(), resume is not None, rank, world,
                              init_method) for rank in range(1, world)]
        group: DataParallel | None = data_parallel(cfg, 0, world, init_method)
        result = pretrain(cfg, run_dir, resume=resume is not None, group=group)
        ray.get(others)
        if group is not None:
            group.close()
        assert result is not None
        return result
    finally:
        lock.release()
        if started:
            ray.shutdown()
