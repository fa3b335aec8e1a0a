"""Choosing the engine: ``rollout.engine`` (``hf`` or ``vllm``) built for a policy.

:func:`build_engine` is the one place an engine is made, for the driver's run
(:func:`turnrl.train.setup.load_model`) and for each Ray rollout worker, from options that
pickle (:func:`turnrl.train.setup.engine_options` writes them from the config).
"""

from __future__ import annotations

from typing import Any

import torch

from turnrl.rollout.engine import TrainingEngine
from turnrl.rollout.hf import HFEngine

__all__ = ["build_engine"]


def build_engine(policy: torch.nn.Module, tokenizer: Any, options: dict[str, Any], *,
                 device: str | None = None) -> TrainingEngine:
    """The engine ``options["kind"]`` sampling from ``policy``.

    ``hf`` shares the policy module (a weight push is a no-op when it is the learner's);
    ``vllm`` copies its weights into vLLM (every push copies them again). The other
    options are the engine's keyword arguments (``max_batch_size``, ``seed``, and for vLLM
    ``max_model_len``, ``kv_cache_gib``, ``gpu_memory_utilization``, ...).
    """
    kwargs = dict(options)
    kind = kwargs.pop("kind", "hf")
    if kind == "hf":
        return HFEngine(policy, eos_token_id=tokenizer.eos_token_id,  # type: ignore[arg-type]
                        pad_token_id=tokenizer.pad_token_id,
                        max_batch_size=kwargs["max_batch_size"], seed=kwargs["seed"])
    if kind == "vllm":
        from turnrl.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(policy, eos_token_id=tokenizer.eos_token_id, device=device,
                          **kwargs)
    raise ValueError(f"unknown engine {kind!r}; choose hf or vllm")
