"""The embedded transformers engine: batched sampling with a KV cache, on CPU or one GPU.

Episodes call :meth:`HFEngine.generate` from their own asyncio tasks; the engine waits until
every runnable episode has queued its request, then decodes them together as one batch.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import DynamicCache, PreTrainedModel

from turnrl.rollout.engine import Completion, SamplingParams


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    session: str | None
    future: asyncio.Future[Completion]


@dataclass
class _SessionCache:
    """The KV cache of one episode's ledger, kept between its turns (one row, no padding)."""

    token_ids: list[int]
    keys: list[Tensor]  # per layer (1, kv_heads, len(token_ids), head_dim)
    values: list[Tensor]


class HFEngine:
    """Token-in / token-out generation with any Hugging Face causal LM.

    Args:
        model: the policy (shared in-process with the learner: ``load_weights`` is a no-op).
        eos_token_id: the token that ends an assistant turn.
        pad_token_id: the id used for left padding (never attended to).
        max_batch_size: at most this many requests are decoded together.
        seed: seed of the engine's own sampling generator.
        reuse_kv: keep each session's KV cache between its turns, so a turn prefills only
            the tokens appended since the last one (the observation delta) instead of the
            whole conversation. The sampled distribution is unchanged.
    """

    def __init__(self, model: PreTrainedModel, *, eos_token_id: int, pad_token_id: int,
                 max_batch_size: int = 256, seed: int = 0, reuse_kv: bool = True) -> None:
        self.model = model
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.reuse_kv = reuse_kv
        self._sessions: dict[str, _SessionCache] = {}
        self._pending: list[_Request] = []
        self._worker: asyncio.Task[None] | None = None
        # transformers >= 5.x names the KV-cache argument `cache`; earlier ones `past_key_values`
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        forward_args = inspect.signature(base.forward).parameters
        self._cache_kwarg = "cache" if "cache" in forward_args else "past_key_values"
        self.stats = {"batches": 0, "requests": 0, "prefill_tokens": 0, "decode_tokens": 0}

    # ------------------------------------------------------------------ Engine protocol
    async def generate(self, prompt_ids: list[int], params: SamplingParams, *,
                       session: str | None = None) -> Completion:
        loop = asyncio.get_running_loop()
        request = _Request(list(prompt_ids), params, session, loop.create_future())
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        return await request.future

    def load_weights(self, model: torch.nn.Module) -> None:
        """Take the learner's weights (a no-op when shared in-process); drops stale KV caches."""
        self._sessions.clear()
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())

    def end_session(self, session: str) -> None:
        """Forget a finished episode's KV cache."""
        self._sessions.pop(session, None)

    # ------------------------------------------------------------------ batching
    async def _serve(self) -> None:
        while self._pending:
            await self._wait_until_settled()
            batch = self._take_batch()
            try:
                completions = self.generate_batch([r.prompt_ids for r in batch], batch[0].params,
                                                  sessions=[r.session for r in batch])
            except Exception as error:  # hand the failure to every waiting episode
                for request in batch:
                    request.future.set_exception(error)
                continue
            for request, completion in zip(batch, completions, strict=True):
                request.future.set_result(completion)

    async def _wait_until_settled(self) -> None:
        """Yield to the event loop until no new requests arrive for two rounds."""
        seen, quiet = -1, 0
        while quiet < 2 and len(self._pending) < self.max_batch_size:
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._pending) == seen else 0
            seen = len(self._pending)

    def _take_batch(self) -> list[_Request]:
        params = self._pending[0].params
        batch = [r for r in self._pending if r.params == params][: self.max_batch_size]
        taken = {id(r) for r in batch}
        self._pending = [r for r in self._pending if id(r) not in taken]
        return batch

    # ------------------------------------------------------------------ decoding
    @torch.inference_mode()
    def generate_batch(self, prompts: list[list[int]], params: SamplingParams, *,
                       sessions: list[str | None] | None = None) -> list[Completion]:
        """Decode a batch of prompts (left-padded, KV-cached) and return one completion each."""
        was_training = self.model.training
        self.model.eval()
        try:
            return self._decode(prompts, params, sessions or [None] * len(prompts))
        finally:
            self.model.train(was_training)

    def _reusable(self, prompt: list[int], session: str | None) -> _SessionCache | None:
        cached = self._sessions.get(session) if (self.reuse_kv and session) else None
        n = len(cached.token_ids) if cached else 0
        return cached if cached and len(prompt) > n and prompt[:n] == cached.token_ids else None

    def _decode(self, prompts: list[list[int]], params: SamplingParams,
                sessions: list[str | None]) -> list[Completion]:
        batch_size = len(prompts)
        cached = [self._reusable(p, s) for p, s in zip(prompts, sessions, strict=True)]
        prefix = [len(c.token_ids) if c else 0 for c in cached]
        suffixes = [p[n:] for p, n in zip(prompts, prefix, strict=True)]
        past_len, width = max(prefix), max(len(s) for s in suffixes)
        # layout of each row: [left-padded cached prefix | left-padded new tokens]
        input_ids = torch.full((batch_size, width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((batch_size, past_len + width), dtype=torch.long)
        for row, suffix in enumerate(suffixes):
            input_ids[row, width - len(suffix):] = torch.tensor(suffix)
            attention_mask[row, past_len - prefix[row]:past_len] = 1
            attention_mask[row, past_len + width - len(suffix):] = 1
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, past_len:]
        stop_ids = torch.tensor(sorted({self.eos_token_id, *params.stop_token_ids}),
                                device=self.device)

        cache = {self._cache_kwarg: self._batched_past(cached, prefix, past_len)}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, use_cache=True, logits_to_keep=1, **cache)
        next_position = position_ids[:, -1:] + 1
        sampled: list[Tensor] = []
        logprobs: list[Tensor] = []
        finished = torch.zeros(batch_size, dtype=torch.bool, device=self.device)
        alive_at_step: list[Tensor] = []
        for step in range(params.max_new_tokens):
            token, logprob = sample_tokens(out.logits[:, -1, :].float(), params, self.generator)
            alive_at_step.append(~finished)
            sampled.append(token)
            logprobs.append(logprob)
            finished = finished | torch.isin(token, stop_ids)
            if bool(finished.all()) or step == params.max_new_tokens - 1:
                break
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones(batch_size, 1)], 1)
            out = self.model(input_ids=token[:, None], attention_mask=attention_mask,
                             position_ids=next_position, use_cache=True, **cache)
            next_position = next_position + 1

        tokens = torch.stack(sampled, 1).tolist()
        lps = torch.stack(logprobs, 1).tolist()
        alive = torch.stack(alive_at_step, 1).tolist()
        stop_set = set(stop_ids.tolist())
        completions = []
        for row in range(batch_size):
            n = sum(alive[row])
            ids = tokens[row][:n]
            reason = "stop" if ids and ids[-1] in stop_set else "length"
            completions.append(Completion(ids, lps[row][:n], reason))
        if self.reuse_kv:
            self._store_sessions(sessions, prompts, completions, cache[self._cache_kwarg],
                                 attention_mask, fed=len(sampled) - 1)
        self.stats["batches"] += 1
        self.stats["requests"] += batch_size
        self.stats["prefill_tokens"] += int(sum(len(s) for s in suffixes))
        self.stats["decode_tokens"] += int(sum(len(c.token_ids) for c in completions))
        return completions


    def _batched_past(self, cached: list[_SessionCache | None], prefix: list[int],
                      past_len: int) -> DynamicCache:
        """A DynamicCache holding each row's cached keys/values, left-padded to ``past_len``."""
        present = [c for c in cached if c is not None]
        if not present:
            return DynamicCache()
        layers = []
        for layer in range(len(present[0].keys)):
            like = present[0].keys[layer]
            shape = (len(cached), like.shape[1], past_len, like.shape[3])
            keys, values = like.new_zeros(shape), like.new_zeros(shape)
            for row, c in enumerate(cached):
                if c is not None:
                    keys[row, :, past_len - prefix[row]:] = c.keys[layer][0]
                    values[row, :, past_len - prefix[row]:] = c.values[layer][0]
            layers.append((keys, values))
        return DynamicCache(layers)

    def _store_sessions(self, sessions: list[str | None], prompts: list[list[int]],
                        completions: list[Completion], cache: DynamicCache,
                        attention_mask: Tensor, *, fed: int) -> None:
        """Keep, per session, the keys/values of its prompt and of the completion tokens that
        were fed back through the model (all but the last sampled one)."""
        prompt_width = attention_mask.shape[1] - fed
        layer_kv = [(layer.keys, layer.values) for layer in cache.layers]
        for row, session in enumerate(sessions):
            if session is None:
                continue
            n_fed = min(len(completions[row].token_ids), fed)
            columns = attention_mask[row, :prompt_width].nonzero()[:, 0]
            columns = torch.cat([columns, prompt_width + torch.arange(n_fed, device=self.device)])
            self._sessions[session] = _SessionCache(
                token_ids=prompts[row] + completions[row].token_ids[:n_fed],
                keys=[k[row:row + 1, :, columns] for k, _ in layer_kv],
                values=[v[row:row + 1, :, columns] for _, v in layer_kv],
            )


def sample_tokens(logits: Tensor, params: SamplingParams,
                  generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Sample one token per row.

    Args:
        logits: (B, V) raw next-token logits.
    Returns:
        tokens (B,) and their log-probs (B,) under ``log_softmax(logits / T)`` (T = 1 when
        greedy), before any top-p truncation.
    """
    if params.temperature == 0:
        tokens = logits.argmax(-1)
        return tokens, torch.log_softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]
    logp = torch.log_softmax(logits / params.temperature, -1)
    probs = logp.exp()
    if params.top_p < 1.0:
        sorted_probs, order = probs.sort(-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > params.top_p  # keep the first > p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    tokens = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]
