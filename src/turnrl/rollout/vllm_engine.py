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

Starting vLLM (its import, the engine arguments, its errors in one line) is
:mod:`turnrl.rollout.vllm_setup`; this module is the engine once started.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from turnrl.rollout.engine import Completion, SamplingParams, TokenSink
from turnrl.rollout.vllm_setup import (
    VLLMEngineError,
    base_weights,
    import_vllm,
    start_llm_engine,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger("turnrl")

__all__ = ["VLLMEngine", "VLLMEngineError", "import_vllm"]

@dataclass
class _Waiting:
    """A request the engine has not handed to vLLM yet."""

    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[Completion]
    on_tokens: TokenSink | None = None


@dataclass
class _Running:
    """A request inside vLLM: what it has sampled so far (vLLM streams deltas)."""

    future: asyncio.Future[Completion] | None
    on_tokens: TokenSink | None = None  # told each step's new tokens (a streamed reply)
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    result: Completion | None = None


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
            self._engine = start_llm_engine(
                policy, self._dir / "model", device=self.device, dtype=self.dtype,
                max_batch_size=max_batch_size, seed=seed, max_model_len=max_model_len,
                kv_cache_gib=kv_cache_gib, gpu_memory_utilization=gpu_memory_utilization,
                tensor_parallel_size=tensor_parallel_size, sleep_mode=sleep_mode,
                block_size=block_size, enforce_eager=enforce_eager, lora_rank=lora_rank)
        except BaseException:
            self.close()
            raise
        self.load_weights(policy)

    # ------------------------------------------------------------------ stop
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
                       session: str | None = None,
                       on_tokens: TokenSink | None = None) -> Completion:
        return await self.submit(prompt_ids, params, session=session, on_tokens=on_tokens)

    def submit(self, prompt_ids: list[int], params: SamplingParams, *,
               session: str | None = None,
               on_tokens: TokenSink | None = None) -> asyncio.Future[Completion]:
        """Queue the request now (it joins the next step) and return its future; cancelling
        the future abandons the request (:func:`turnrl.rollout.engine.submit`)."""
        if params.top_p < 1:
            raise ValueError(
                f"VLLMEngine: top_p={params.top_p}: vLLM records log-probs after top-p "
                "truncation, not of the temperature-scaled distribution the learner "
                "recomputes; sample with top_p=1 or use the hf engine")
        loop = asyncio.get_running_loop()
        waiting = _Waiting(list(prompt_ids), params, loop.create_future(), on_tokens)
        self._pending.append(waiting)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        return waiting.future

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
            self._running[request_id] = _Running(waiting.future, waiting.on_tokens)
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
            logprobs = [step[token].logprob for token, step in
                        zip(new, completion.logprobs or [], strict=True)]
            running.logprobs += logprobs
            running.versions += [self.version] * len(new)
            if new and running.on_tokens is not None:
                running.on_tokens(new, logprobs)
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


