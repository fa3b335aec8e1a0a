"""Scaling out on Ray and torch.distributed: env and rollout workers, the rollout cluster,
data-parallel and FSDP learners (see docs/scaling.md)."""
